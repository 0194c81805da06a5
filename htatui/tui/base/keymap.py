"""The user's keymap: `[keys]` in keymap.toml gives a binding id (e.g. "app.ranks") new keys ("R", "o,ctrl+s").

Every binding in htatui/tui has an id (binding_catalog lists them); the app hands the keymap to Textual's
`App.set_keymap`, which rebinds those ids on every screen. A bad file never stops the app: each problem is
one line naming the file, and the app shows them in one notification.
"""

from __future__ import annotations

import difflib
import functools
import os
import tomllib
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from textual.binding import Binding
from textual.keys import Keys, _character_to_key

from htatui.sources.user_file import read_user_text
from htatui.tui.base.binding_catalog import binding_ids, keymap_clashes

KEYMAP_ENV = "HTATUI_KEYMAP"
"""Names the keymap file, in place of the one under the config folder."""

KEYS_TABLE = "keys"
"""The one table the file holds: `[keys]`, binding id = keys."""

MODIFIERS = ("ctrl", "shift", "alt", "meta", "super", "hyper")

MODIFIER_ALIASES = {"control": "ctrl", "option": "alt", "opt": "alt", "cmd": "super", "command": "super"}

KEY_ALIASES = {
    "esc": "escape",
    "return": "enter",
    "pgup": "pageup",
    "page_up": "pageup",
    "pgdn": "pagedown",
    "pgdown": "pagedown",
    "page_down": "pagedown",
    "del": "delete",
    "ins": "insert",
    "bs": "backspace",
    "spacebar": "space",
}
"""Names people write for keys Textual names otherwise (`F1`, `Esc`, `PgUp` → f1, escape, pageup)."""

MAX_KEYS_PER_BINDING = 8
"""Keys one binding keeps: a keymap naming more (a key repeated 500,000 times took 32 s to start
and left q unanswered for 70 s) keeps its first different ones, and says so once."""


@dataclass(frozen=True)
class KeymapLoad:
    """The keymap read from a file (binding id → keys) and one line per problem: an entry or a file that was
    ignored, or a key the keymap takes from another binding."""

    keymap: dict[str, str]
    problems: tuple[str, ...]


def keymap_path() -> Path:
    """`$HTATUI_KEYMAP`, else `$XDG_CONFIG_HOME/htatui/keymap.toml`, else `~/.config/htatui/keymap.toml`."""
    named = os.environ.get(KEYMAP_ENV)
    if named:
        return Path(named).expanduser()
    config_home = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config_home) / "htatui" / "keymap.toml"


def load_keymap(path: Path | None = None) -> KeymapLoad:
    """Read and check the keymap file (default: `keymap_path()`); no file is an empty keymap."""
    path = keymap_path() if path is None else path
    if not os.path.lexists(path):
        return KeymapLoad({}, ())
    try:
        text = read_user_text(path)
    except (OSError, UnicodeDecodeError) as error:
        return KeymapLoad({}, (f"{path}: cannot read it ({_one_line(error)}); default keys used",))
    loaded = parse_keymap(text, str(path), binding_ids)
    if not loaded.keymap:
        return loaded
    return KeymapLoad(loaded.keymap, loaded.problems + keymap_clashes(loaded.keymap, str(path)))


def parse_keymap(text: str, source: str, known: Callable[[], Collection[str]]) -> KeymapLoad:
    """Parse keymap TOML; what cannot be used is left out with a one-line problem naming `source`."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        return KeymapLoad({}, (f"{source}: not valid TOML ({_one_line(error)}); default keys used",))
    problems = [f"{source}: {name!r} is outside [{KEYS_TABLE}] (ignored)" for name in data if name != KEYS_TABLE]
    table = data.get(KEYS_TABLE, {})
    if not isinstance(table, dict):
        return KeymapLoad({}, (*problems, f"{source}: {KEYS_TABLE} must be a table such as [{KEYS_TABLE}]"))
    # The ids are collected (which imports every screen) only when there is something to check.
    valid = set(known()) if table else set()
    keymap: dict[str, str] = {}
    for binding_id, keys in table.items():
        problem = _entry_problem(binding_id, keys, valid)
        if problem:
            problems.append(f"{source}: {problem} (ignored)")
            continue
        written = [key.strip() for key in keys.split(",")]
        different = list(dict.fromkeys(normal_key(key) for key in written))
        bad = next(((key, why) for key in different if (why := _key_problem(key))), None)
        if bad is not None:
            problems.append(f"{source}: {binding_id!r} = {_shown(keys)}: {bad[1]} (ignored)")
            continue
        if len(written) > len(different) or len(different) > MAX_KEYS_PER_BINDING:
            problems.append(f"{source}: {_trimmed(binding_id, len(written), different)}")
        keymap[binding_id] = ",".join(different[:MAX_KEYS_PER_BINDING])
    return KeymapLoad(keymap, tuple(problems))


def _shown(keys: str) -> str:
    """The keys as written, cut when long (a problem is one line)."""
    return repr(keys) if len(keys) <= 60 else repr(keys[:57]) + "…"


def _trimmed(binding_id: str, written: int, different: list[str]) -> str:
    kept = different[:MAX_KEYS_PER_BINDING]
    said = f"{binding_id!r} names {written:,} keys, {len(different):,} different"
    return f"{said}: kept {', '.join(kept)}" + (
        f" (at most {MAX_KEYS_PER_BINDING} a binding)" if len(different) > len(kept) else ""
    )


def _entry_problem(binding_id: str, keys: Any, valid: Collection[str]) -> str | None:
    if binding_id not in valid:
        close = difflib.get_close_matches(binding_id, valid, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return f"unknown binding id {binding_id!r}{hint}"
    if not isinstance(keys, str):
        return f'{binding_id!r} = {keys!r}: keys must be a string such as "R" or "o,ctrl+s"'
    return None


def normal_key(key: str) -> str:
    """A key as Textual names it: 'F1' → 'f1', 'Ctrl+S' → 'ctrl+s', 'Esc' → 'escape', 'shift+a' → 'A';
    a character stays as it is ('R' is shift+r)."""
    if len(key) <= 1 or key.endswith("+") or any(char.isspace() for char in key):
        return key
    *modifiers, name = key.split("+")
    modifiers = [MODIFIER_ALIASES.get(m.lower(), m.lower()) for m in modifiers]
    if len(name) > 1:
        name = KEY_ALIASES.get(name.lower(), name.lower())
    elif modifiers == ["shift"] and name.isalpha():
        return name.upper()
    elif "ctrl" in modifiers or "alt" in modifiers:
        # A terminal sends ctrl+S as ctrl+s: the letter's case is not seen under ctrl.
        name = name.lower()
    return "+".join([*modifiers, name])


def _key_problem(key: str) -> str | None:
    """Why `key` is no key Textual can produce (e.g. "R", "ctrl+s", "f5", "question_mark", "?" are), or None."""
    if not key:
        return "an empty key"
    if any(char.isspace() for char in key):
        return f"key {key!r} has a space (write ctrl+s, not ctrl + s)"
    *modifiers, name = key.split("+") if len(key) > 1 else [key]
    if not name:
        return f"key {key!r} ends with + (the plus key is plus)"
    unknown = [modifier for modifier in modifiers if modifier not in MODIFIERS]
    if unknown:
        return f"key {key!r}: {unknown[0]!r} is no modifier ({', '.join(MODIFIERS)})"
    if len(name) == 1 and name.isprintable() or name in key_names():
        return None
    close = difflib.get_close_matches(name, key_names(), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else " (keys: a character, f1…f24, enter, escape, pageup, …)"
    return f"key {key!r} is no key a terminal sends Textual{hint}"


@functools.cache
def key_names() -> frozenset[str]:
    """The key names Textual gives what a terminal sends: its named keys and each character's name."""
    named = {key.value for key in Keys if "+" not in key.value and not key.value.startswith("<")}
    characters = {_character_to_key(chr(code)) for code in range(33, 127)}
    return frozenset(named - {"ctrl-at", "return"} | characters)


def _one_line(error: Exception) -> str:
    return " ".join(str(error).split())


def remapped(binding: Binding, keymap: Mapping[str, str]) -> Binding:
    """The binding with the keys the keymap gives its id; like Textual, a remapped key drops its key_display."""
    keys = keymap.get(binding.id) if binding.id else None
    return binding.with_key(keys) if keys else binding
