"""One error path (issue 39 #5): every refused input is an HtatuiError, printed once by the CLI as
`htatui: MESSAGE` with exit 2; every cancellation is one Cancelled; htatui's own modules never hide
behind a caught ImportError."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import sys
from pathlib import Path
from typing import Any

import pytest

import htatui
from htatui.errors import Cancelled, HtatuiError

cli_main = importlib.import_module("htatui.cli.main")  # htatui.cli's `main` is the function

INTERNAL = {
    "htatui.trace.workers.Terminated": "a signal ending the process, turned into its exit status by main()",
    "htatui.trace.chunks.NotChunkable": "tells the decoder to read the file whole; never reaches a user",
    "htatui.trace.cache.NotCacheable": "tells the loader to skip the cache; never reaches a user",
    "htatui.trace.memory_snapshot.RefusedPickle": "turned into the snapshot's one-line refusal where it is caught",
    "htatui.sources.user_file.UserFileError": "an OSError whose strerror each settings reader words as its own error",
    "htatui.analysis.core.columns.MissingColumnSpec": "a table declared without a column: a bug in htatui, not input",
    "htatui.analysis.model.callstack._HtaSortError": "HTA's sort failing, caught beside it to copy HTA's fallback",
    "htatui.analysis.views.critical_path.longest.CycleError": "caught by the critical path, which says it has no path",
}
"""Exception classes that are not a refused input, each with why."""


def _exception_classes() -> dict[str, type[BaseException]]:
    """Every exception class defined in an htatui module (the app's modules included)."""
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(htatui.__path__, "htatui."):
        if info.name == "htatui.__main__":
            continue  # running it is main()
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == info.name:
                found[f"{info.name}.{name}"] = value
    return found


def test_every_error_class_is_an_htatui_error_or_a_cancellation() -> None:
    classes = _exception_classes()
    assert "htatui.trace.loader.LoadError" in classes and "htatui.tui.theming.ThemeFileError" in classes
    odd = [
        name
        for name, cls in classes.items()
        if name not in INTERNAL and not issubclass(cls, HtatuiError | Cancelled) and cls not in (HtatuiError, Cancelled)
    ]
    assert odd == [], f"derive these from htatui.errors.HtatuiError (or Cancelled), or list them in INTERNAL: {odd}"
    assert sorted(set(INTERNAL) - set(classes)) == [], "INTERNAL names a class that is gone"
    cancels = sorted(name for name, cls in classes.items() if issubclass(cls, Cancelled) and cls is not Cancelled)
    assert cancels == [
        "htatui.sources.remote.DownloadCancelled",
        "htatui.trace.fetch.FetchCancelled",
        "htatui.trace.loader.LoadCancelled",
    ]
    from htatui.analysis.core.cancel import Cancelled as analysis_cancelled

    assert analysis_cancelled is Cancelled


def test_the_value_errors_are_still_value_errors() -> None:
    """Callers that catch ValueError (an option a view refuses) still catch the ones that were."""
    from htatui.analysis.core.comm_rules import CommRulesError
    from htatui.analysis.query import QueryError
    from htatui.trace.counter_args import CounterArgsError

    for cls in (CommRulesError, QueryError, CounterArgsError):
        assert issubclass(cls, HtatuiError) and issubclass(cls, ValueError)


@pytest.mark.parametrize(
    "argv",
    [
        ["report", "{job}", "--view", "temporal"],
        ["info", "{job}"],
        ["diagnose", "{job}"],
        ["export", "counters", "{job}", "--out", "{out}"],
    ],
    ids=lambda argv: argv[0],
)
def test_an_htatui_error_inside_a_subcommand_is_one_line_and_exit_2(
    argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    job = tmp_path / "job"
    job.mkdir()

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise HtatuiError(f"{job}/rank-0.json: refused on purpose")

    monkeypatch.setattr(cli_main, "_load", refuse)
    code = cli_main.main([word.format(job=job, out=tmp_path / "out") for word in argv])
    out = capsys.readouterr()
    assert code == 2
    assert out.err == f"htatui: {job}/rank-0.json: refused on purpose\n"
    assert out.out == ""


@pytest.mark.parametrize(
    ("argv", "module"), [(["diff", "a", "b"], "htatui.cli.diff"), (["export"], "htatui.cli.export")]
)
def test_a_subcommand_whose_module_cannot_import_fails_loudly(
    argv: list[str], module: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A broken import is an ImportError, not a subcommand that silently vanishes from the parser."""
    monkeypatch.delitem(sys.modules, module, raising=False)
    monkeypatch.setitem(sys.modules, module, None)  # `import` of a None entry raises ImportError
    with pytest.raises(ImportError):
        cli_main.main(argv)
