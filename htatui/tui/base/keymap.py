"""The user's keymap: `[keys]` in keymap.toml gives a binding id (e.g. "app.ranks") new keys ("R", "o,ctrl+s").

Every binding in htatui/tui has an id (binding_catalog lists them); the app hands the keymap to Textual's
`App.set_keymap`, which rebinds those ids on every screen. A bad file never stops the app: each problem is
one line naming the file, and the app shows them in one notification.
"""

from __future__ import annotations

import difflib
import os
import tomllib
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from textual.binding import Binding

from htatui.sources.user_file import read_user_text
from htatui.tui.base.binding_catalog import binding_ids, keymap_clashes

KEYMAP_ENV = "HTATUI_KEYMAP"
"""Names the keymap file, in place of the one under the config folder."""

KEYS_TABLE = "keys"
"""The one table the file holds: `[keys]`, binding id = keys."""

MODIFIERS = ("ctrl", "shift", "alt", "meta", "super", "hyper")


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
        else:
            keymap[binding_id] = ",".join(key.strip() for key in keys.split(","))
    return KeymapLoad(keymap, tuple(problems))


def _entry_problem(binding_id: str, keys: Any, valid: Collection[str]) -> str | None:
    if binding_id not in valid:
        close = difflib.get_close_matches(binding_id, valid, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return f"unknown binding id {binding_id!r}{hint}"
    if not isinstance(keys, str):
        return f'{binding_id!r} = {keys!r}: keys must be a string such as "R" or "o,ctrl+s"'
    for key in keys.split(","):
        problem = _key_problem(key.strip())
        if problem:
            return f"{binding_id!r} = {keys!r}: {problem}"
    return None


def _key_problem(key: str) -> str | None:
    """Why `key` is no Textual key name (e.g. "R", "ctrl+s", "f5", "question_mark", "?"), or None."""
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
    return None


def _one_line(error: Exception) -> str:
    return " ".join(str(error).split())


def remapped(binding: Binding, keymap: Mapping[str, str]) -> Binding:
    """The binding with the keys the keymap gives its id; like Textual, a remapped key drops its key_display."""
    keys = keymap.get(binding.id) if binding.id else None
    return binding.with_key(keys) if keys else binding
