"""The user's keymap: the file is found and checked, the app rebinds by id, the help and docs follow."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual.app import App
from textual.binding import Binding
from textual.notifications import Notification
from tui_helpers import make_app, press, ready

from htatui.trace import TraceSet
from htatui.tui.app import HtaTuiApp
from htatui.tui.base.binding_catalog import BindingInfo, all_bindings, binding_ids, keymap_clashes
from htatui.tui.base.keymap import KEYMAP_ENV, keymap_path, load_keymap, parse_keymap, remapped
from htatui.tui.commands import HtaCommands
from htatui.tui.diff_app import DiffApp
from htatui.tui.memory_app import MemoryApp
from htatui.tui.screens.help import HelpScreen
from htatui.tui.screens.rank_picker import RankPicker
from htatui.tui.widgets.status_bar import page_keys
from htatui.tui.widgets.table import ViewTable
from htatui.tui.widgets.table_pane import TablePane

ROOT = Path(__file__).resolve().parents[2]
KEYMAP_DOC = ROOT / "docs" / "keymap.md"
GENERATED_MARK = "<!-- generated from the code below this line: tests/tui/test_keymap.py checks it -->"
KNOWN = ("app.ranks", "table.sort", "view.filter")


def binding(binding_id: str) -> BindingInfo:
    return next(info for info in all_bindings() if info.id == binding_id)


def class_binding(cls: type, binding_id: str) -> Binding:
    return next(item for item in cls.__dict__["BINDINGS"] if isinstance(item, Binding) and item.id == binding_id)


def write_keymap(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, text: str) -> Path:
    path = tmp_path / "keymap.toml"
    path.write_text(text, encoding="utf-8")
    monkeypatch.setenv(KEYMAP_ENV, str(path))
    return path


def keymap_notices(app: App[Any]) -> list[Notification]:
    return [notice for notice in app._notifications if notice.title == "Keymap"]


def parse(text: str) -> tuple[dict[str, str], tuple[str, ...]]:
    loaded = parse_keymap(text, "km.toml", lambda: KNOWN)
    return loaded.keymap, loaded.problems


# ---- where the file is, and what it may say ------------------------------------------------
def test_the_file_is_named_by_the_variable_else_found_under_the_config_folder(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(KEYMAP_ENV, str(tmp_path / "mine.toml"))
    assert keymap_path() == tmp_path / "mine.toml"
    monkeypatch.delenv(KEYMAP_ENV)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert keymap_path() == tmp_path / "xdg" / "htatui" / "keymap.toml"
    monkeypatch.delenv("XDG_CONFIG_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert keymap_path() == tmp_path / "home" / ".config" / "htatui" / "keymap.toml"


def test_no_file_is_an_empty_keymap_without_problems(tmp_path: Path) -> None:
    loaded = load_keymap(tmp_path / "absent.toml")
    assert loaded.keymap == {} and loaded.problems == ()


def test_keys_are_read_from_the_keys_table_spaces_around_commas_dropped() -> None:
    keymap, problems = parse('[keys]\n"app.ranks" = "R"\n"table.sort" = "o, ctrl+s"\n')
    assert keymap == {"app.ranks": "R", "table.sort": "o,ctrl+s"}
    assert problems == ()


@pytest.mark.parametrize(
    ("text", "kept", "said"),
    [
        ('[keys]\n"app.rank" = "R"\n"view.filter" = "F"\n', {"view.filter": "F"}, "unknown binding id 'app.rank'"),
        ('[keys]\n"app.ranks" = 3\n', {}, "keys must be a string"),
        ('[keys]\n"app.ranks" = ["R"]\n', {}, "keys must be a string"),
        ('[keys]\n"table.sort" = "o,,s"\n', {}, "an empty key"),
        ('[keys]\n"table.sort" = "ctrl + s"\n', {}, "has a space"),
        ('[keys]\n"table.sort" = "ctl+s"\n', {}, "'ctl' is no modifier"),
        ('[keys]\n"table.sort" = "ctrl+"\n', {}, "ends with +"),
        ('"app.ranks" = "R"\n', {}, "outside [keys]"),
        ('keys = "R"\n', {}, "must be a table"),
        ("[keys\n", {}, "not valid TOML"),
    ],
)
def test_what_cannot_be_used_is_one_line_naming_the_file(text: str, kept: dict[str, str], said: str) -> None:
    keymap, problems = parse(text)
    assert keymap == kept
    assert len(problems) == 1, problems
    assert problems[0].startswith("km.toml: ") and said in problems[0]
    assert "\n" not in problems[0] and "Traceback" not in problems[0]


@pytest.mark.parametrize(
    ("written", "kept"),
    [
        ("F1", "f1"),
        ("Ctrl+S", "ctrl+s"),
        ("CTRL+shift+Up", "ctrl+shift+up"),
        ("Esc", "escape"),
        ("PgUp, PgDn", "pageup,pagedown"),
        ("shift+a", "A"),
        ("R", "R"),
        ("?", "?"),
        ("question_mark", "question_mark"),
    ],
)
def test_key_names_are_written_as_textual_names_them(written: str, kept: str) -> None:
    """Issue 38 #2: `"app.help" = "F1"` was accepted, shown as `F1 Help`, and never fired."""
    keymap, problems = parse(f'[keys]\n"app.ranks" = "{written}"\n')
    assert keymap == {"app.ranks": kept} and problems == ()


@pytest.mark.parametrize("key", ["F25", "ctrl+escap", "hyper+pagedownn", "enterr"])
def test_a_key_no_terminal_sends_is_one_line_like_an_unknown_id(key: str) -> None:
    keymap, problems = parse(f'[keys]\n"app.ranks" = "R,{key}"\n"table.sort" = "o"\n')
    assert keymap == {"table.sort": "o"}
    (problem,) = problems
    assert problem.startswith("km.toml: 'app.ranks' = ") and "is no key a terminal sends Textual" in problem
    assert problem.endswith("(ignored)") and "\n" not in problem


def test_a_key_repeated_for_one_binding_is_kept_once_and_said_once() -> None:
    """Issue 35 #13: one key 500,000 times for one binding took 32 s to start and left q unanswered."""
    import time

    started = time.perf_counter()
    keymap, problems = parse('[keys]\n"app.ranks" = "' + ",".join(["x"] * 500_000) + '"\n')
    assert time.perf_counter() - started < 10
    assert keymap == {"app.ranks": "x"}
    assert problems == ("km.toml: 'app.ranks' names 500,000 keys, 1 different: kept x",)
    many = ",".join(f"f{n}" for n in range(1, 13))
    keymap, problems = parse(f'[keys]\n"app.ranks" = "{many}"\n')
    assert keymap == {"app.ranks": "f1,f2,f3,f4,f5,f6,f7,f8"}
    assert problems == (
        "km.toml: 'app.ranks' names 12 keys, 12 different: kept f1, f2, f3, f4, f5, f6, f7, f8 (at most 8 a binding)",
    )
    assert keymap_clashes({"app.ranks": "x"}, "km.toml") == ()


def test_an_unknown_id_suggests_the_nearest_known_one() -> None:
    _keymap, problems = parse('[keys]\n"table.srot" = "o"\n')
    assert "did you mean 'table.sort'?" in problems[0]


def test_an_unreadable_file_is_one_line_too(tmp_path: Path) -> None:
    path = tmp_path / "keymap.toml"
    path.write_bytes(b"\xff\xfe[keys]")
    loaded = load_keymap(path)
    assert loaded.keymap == {} and len(loaded.problems) == 1
    assert loaded.problems[0].startswith(f"{path}: ") and "\n" not in loaded.problems[0]


def test_remapped_takes_the_keymaps_keys_and_drops_the_key_display() -> None:
    help_binding = class_binding(HtaTuiApp, "app.help")
    assert help_binding.key_display is not None
    assert remapped(help_binding, {}) is help_binding
    moved = remapped(help_binding, {"app.help": "f2"})
    assert (moved.key, moved.key_display, moved.action) == ("f2", None, help_binding.action)


# ---- every binding id, and the doc that lists them ----------------------------------------
def test_every_binding_in_the_tui_has_one_unique_id() -> None:
    infos = all_bindings()
    ids = [info.id for info in infos]
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)
    assert set(ids) == binding_ids()
    # The catalogue holds the bindings of the app, of screens (modal ones too) and of widgets.
    for cls in (HtaTuiApp, DiffApp, RankPicker, HelpScreen, ViewTable):
        declared = {item.id for item in cls.__dict__["BINDINGS"] if isinstance(item, Binding)}
        assert None not in declared, cls
        assert declared <= set(ids), cls


def keymap_reference() -> str:
    """The generated part of docs/keymap.md: per class, each binding's id, default keys and meaning."""
    lines: list[str] = []
    owner: type | None = None
    for info in all_bindings():
        if info.owner is not owner:
            owner = info.owner
            title = getattr(owner, "VIEW_TITLE", "")
            lines += ["", f"## {owner.__name__}" + (f" ({title})" if title else ""), ""]
            lines += ["| id | default keys | what it does |", "|---|---|---|"]
        lines.append(f"| `{info.id}` | `{info.keys}` | {info.description} |")
    return "\n".join(lines).lstrip("\n") + "\n"


def test_the_keymap_doc_lists_every_binding_id() -> None:
    """HTATUI_WRITE_KEYMAP_DOC=1 rewrites the generated part after a binding changes."""
    text = KEYMAP_DOC.read_text(encoding="utf-8")
    assert GENERATED_MARK in text
    head = text[: text.index(GENERATED_MARK) + len(GENERATED_MARK)]
    expected = f"{head}\n\n{keymap_reference()}"
    if os.environ.get("HTATUI_WRITE_KEYMAP_DOC") == "1":
        KEYMAP_DOC.write_text(expected, encoding="utf-8")
        text = expected
    assert text == expected, "docs/keymap.md is out of date: run HTATUI_WRITE_KEYMAP_DOC=1 pytest -k keymap_doc"


def test_the_readme_points_to_the_keymap_doc_and_the_docs_example_is_a_good_keymap(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "docs/keymap.md" in readme and KEYMAP_ENV in readme
    doc = KEYMAP_DOC.read_text(encoding="utf-8")
    example = doc[doc.index("```toml\n") + len("```toml\n") :]
    (tmp_path / "keymap.toml").write_text(example[: example.index("```")], encoding="utf-8")
    loaded = load_keymap(tmp_path / "keymap.toml")
    assert loaded.problems == () and "app.ranks" in loaded.keymap


# ---- the app -------------------------------------------------------------------------------
async def test_a_key_written_f1_opens_the_help(
    small_traces: TraceSet, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Issue 38 #2: `"app.help" = "F1"` left the app with no help at all."""
    write_keymap(monkeypatch, tmp_path, '[keys]\n"app.help" = "F1"\n')
    app = make_app(small_traces)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await ready(pilot)
        assert keymap_notices(app) == []
        await press(pilot, "f1")
        assert isinstance(app.screen, HelpScreen)


async def test_a_remapped_app_key_opens_the_rank_picker_and_the_default_no_longer_does(
    small_traces: TraceSet, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    ranks = binding("app.ranks")
    assert ranks.owner is HtaTuiApp and ranks.keys != "R"
    write_keymap(monkeypatch, tmp_path, '[keys]\n"app.ranks" = "R"\n')
    app = make_app(small_traces)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await ready(pilot)
        assert keymap_notices(app) == []
        await press(pilot, ranks.keys)
        assert not isinstance(app.screen, RankPicker)
        await press(pilot, "R")
        assert isinstance(app.screen, RankPicker)
        await press(pilot, "escape")
        assert not isinstance(app.screen, RankPicker)


async def test_a_remapped_table_key_sorts_a_views_table(
    small_traces: TraceSet, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    sort = binding("table.sort")
    assert sort.owner is ViewTable and sort.keys not in ("o", "ctrl+s")
    write_keymap(monkeypatch, tmp_path, '[keys]\n"table.sort" = "o,ctrl+s"\n')
    app = make_app(small_traces)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await press(pilot, page_keys()["kernels"])
        assert app.current_mode == "kernels"
        table = app.screen.query_one("#kernels-main", TablePane).table
        table.focus()
        first = table.sort_key
        await press(pilot, sort.keys)
        assert table.sort_key == first
        await press(pilot, "o")
        second = table.sort_key
        assert second != first
        await press(pilot, "ctrl+s")
        assert table.sort_key not in (first, second)
        # The palette names the key that works now.
        helps = {entry.title: entry.help for entry in HtaCommands(app.screen).entries()}
        assert helps[f"table: {sort.description}"] == "Key o"


@pytest.mark.parametrize(
    ("text", "said"),
    [('[keys]\n"app.rankz" = "R"\n', "unknown binding id 'app.rankz'"), ("[keys\n", "not valid TOML")],
)
async def test_a_bad_keymap_notifies_in_one_line_and_the_defaults_still_work(
    small_traces: TraceSet, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, text: str, said: str
) -> None:
    path = write_keymap(monkeypatch, tmp_path, text)
    app = make_app(small_traces)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await ready(pilot)
        (notice,) = keymap_notices(app)
        assert notice.severity == "warning"
        assert notice.message.startswith(f"{path}: ") and said in notice.message
        assert "\n" not in notice.message and "Traceback" not in notice.message
        await press(pilot, binding("app.ranks").keys)
        assert isinstance(app.screen, RankPicker)


async def test_a_key_taken_from_another_binding_is_said_and_the_keymap_wins(
    small_traces: TraceSet, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    diff = binding("app.diff")
    assert diff.owner is HtaTuiApp
    path = write_keymap(monkeypatch, tmp_path, f'[keys]\n"app.ranks" = "{diff.keys}"\n')
    app = make_app(small_traces)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await ready(pilot)
        (notice,) = keymap_notices(app)
        assert notice.message == f"{path}: {diff.keys!r} for 'app.ranks' replaces 'app.diff' in HtaTuiApp"
        await press(pilot, diff.keys)
        assert isinstance(app.screen, RankPicker)


def test_clashes_name_the_lost_binding_once_where_it_is_declared() -> None:
    def declared_in(binding_id: str) -> str:
        return binding(binding_id).owner.__name__

    rerun, sort, copy = binding("view.rerun"), binding("table.sort"), binding("table.copy")
    clashes = keymap_clashes({"view.filter": rerun.keys, "table.sort": "home", "table.full": copy.keys}, "km")
    # A view inherits view.* from its base: the clash is named in the base only.
    assert f"km: {rerun.keys!r} for 'view.filter' replaces 'view.rerun' in {declared_in('view.rerun')}" in clashes
    # Textual's own bindings (the DataTable's home) count too.
    assert f"km: 'home' for 'table.sort' replaces Textual's 'scroll_home' in {sort.owner.__name__}" in clashes
    assert any("'table.full'" in clash and "'table.copy'" in clash for clash in clashes)
    assert len(clashes) == 3
    # Two remapped ids on one key, and a swap of two keys, which is no clash.
    both = keymap_clashes({"table.sort": "x", "table.copy": "x"}, "km")
    assert both == (f"km: 'x' is given to both 'table.copy' and 'table.sort' in {sort.owner.__name__}",)
    reverse = binding("table.reverse")
    assert keymap_clashes({"table.sort": reverse.keys, "table.reverse": sort.keys}, "km") == ()


def test_a_clash_in_several_screens_is_one_line() -> None:
    """Issue 35: a view.* binding moved onto `e` was one warning per screen that binds `e`."""
    taken = [info for info in all_bindings() if info.keys == "e" and not info.id.startswith("view.")]
    assert len(taken) >= 2  # the Counters, Critical path, Ops and Patterns pages bind e
    (line,) = keymap_clashes({"view.zoom": "e"}, "km")
    assert line.startswith("km: 'e' for 'view.zoom' replaces ")
    for info in taken:
        assert f"{info.id!r} in {info.owner.__name__}" in line


async def test_the_help_shows_the_keys_as_remapped(
    small_traces: TraceSet, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    write_keymap(monkeypatch, tmp_path, '[keys]\n"app.ranks" = "R"\n"table.sort" = "o,ctrl+s"\n')
    app = make_app(small_traces)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await press(pilot, binding("app.help").keys.split(",")[0])
        assert isinstance(app.screen, HelpScreen)
        page = app.screen.page()
    ranks, sort = binding("app.ranks"), binding("table.sort")
    ctrl_s = app.get_key_display(Binding("ctrl+s", sort.description))
    assert f"- `R` {ranks.description}" in page
    assert f"- `{ranks.keys}` {ranks.description}" not in page
    assert f"- `o / {ctrl_s}` {sort.description}" in page


@pytest.mark.parametrize("make", [lambda: DiffApp(Path("base"), Path("test")), lambda: MemoryApp(Path("x.pickle"))])
def test_the_diff_and_memory_apps_read_the_keymap_too(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, make: Callable[[], App[Any]]
) -> None:
    write_keymap(monkeypatch, tmp_path, '[keys]\n"diff_app.quit" = "Q"\n"memory_app.quit" = "Q"\n')
    app = make()
    assert isinstance(app, (DiffApp, MemoryApp))
    assert app.keymap == {"diff_app.quit": "Q", "memory_app.quit": "Q"}
