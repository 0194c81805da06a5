"""Files htatui does not read are named by their format, with what to do instead (issue 37, item 5):
one line and exit 2 in `info`, `check` and `report`, the same line in the app."""

from __future__ import annotations

import json
import pickle
import re
from pathlib import Path

import pytest
from cli_util import cli
from kineto_util import kernel, runtime, step, write_trace

from htatui.trace.formats import NSYS, PERFETTO, ROCPROF, SNAPSHOT, XPLANE, foreign_format

# An XSpace starts with a plane named like "/host:CPU"; a Perfetto trace with a packet of other fields.
XPLANE_BYTES = b"\x0a\x20\x12\x0e/host:metadata\x22\x00" + b"\x00" * 16
PERFETTO_BYTES = b"\x0a\x0c\x08\x01\x12\x08\x0a\x06kineto" + b"\x00" * 16


def _files(tmp_path: Path) -> dict[str, Path]:
    files = {
        "xplane": tmp_path / "host.xplane.pb",
        "perfetto": tmp_path / "trace.pb",
        "pftrace": tmp_path / "trace.pftrace",
        "nsys": tmp_path / "report1.nsys-rep",
        "rocprof_json": tmp_path / "1234_results.json",
        "rocprof_csv": tmp_path / "1234_kernel_trace.csv",
        "snapshot": tmp_path / "snapshot.pickle",
    }
    files["xplane"].write_bytes(XPLANE_BYTES)
    files["perfetto"].write_bytes(PERFETTO_BYTES)
    files["pftrace"].write_bytes(PERFETTO_BYTES)
    files["nsys"].write_bytes(b"\x00" * 64)
    files["rocprof_json"].write_text(json.dumps({"rocprofiler-sdk-tool": [{"metadata": {"pid": 1}}]}))
    files["rocprof_csv"].write_text("Kind,Agent_Id,Kernel_Name\n")
    files["snapshot"].write_bytes(pickle.dumps({"segments": [], "device_traces": []}, protocol=4))
    return files


def test_each_format_is_told_by_name_and_first_bytes(tmp_path: Path) -> None:
    files = _files(tmp_path)
    expected = {
        "xplane": XPLANE,
        "perfetto": PERFETTO,
        "pftrace": PERFETTO,
        "nsys": NSYS,
        "rocprof_json": ROCPROF,
        "rocprof_csv": ROCPROF,
        "snapshot": SNAPSHOT,
    }
    assert {kind: foreign_format(path) for kind, path in files.items()} == expected
    # An XPlane without its usual name is still told from a Perfetto protobuf by its plane names.
    renamed = tmp_path / "profile.pb"
    renamed.write_bytes(XPLANE_BYTES)
    assert foreign_format(renamed) is XPLANE
    assert foreign_format(write_trace(tmp_path / "rank-0.json.gz", [step(1, 0, 10)])) is None


@pytest.mark.parametrize("command", ["info", "check", "report"])
@pytest.mark.parametrize(
    ("kind", "words"),
    [
        ("xplane", "XPlane profile"),
        ("perfetto", "Perfetto protobuf trace"),
        ("nsys", "Nsight Systems report"),
        ("rocprof_json", "rocprofv3 output"),
    ],
)
def test_a_foreign_file_is_one_line_naming_its_format(
    tmp_path: Path, command: str, kind: str, words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _files(tmp_path)[kind]
    result = cli(capsys, command, str(path), *(["--view", "temporal"] if command == "report" else []))
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"htatui: {path}: ") and words in line and "not a Kineto trace" in line
    assert "Traceback" not in result.stderr and result.stdout == ""


@pytest.mark.parametrize("command", ["info", "check"])
def test_a_snapshot_only_folder_points_to_htatui_memory(
    tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "snap"
    folder.mkdir()
    (folder / "snapshot.pickle").write_bytes(_files(tmp_path)["snapshot"].read_bytes())
    result = cli(capsys, command, str(folder))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"htatui: {folder}: no trace here, only a CUDA memory snapshot (snapshot.pickle); "
        f"open it with `htatui memory {folder}`"
    ]


def test_a_folder_of_one_foreign_format_names_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "jax"
    folder.mkdir()
    (folder / "host.xplane.pb").write_bytes(XPLANE_BYTES)
    result = cli(capsys, "info", str(folder))
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"htatui: {folder}: no Kineto trace here; host.xplane.pb is a JAX/TensorFlow XPlane profile")


def test_a_foreign_file_beside_traces_is_a_named_note(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    events = [step(1, 0, 100), runtime("cudaLaunchKernel", 10, 5, corr=1), kernel("gemm", 20, 30, corr=1)]
    write_trace(tmp_path / "rank-0.json", events, rank=0)
    (tmp_path / "host.xplane.pb").write_bytes(XPLANE_BYTES)
    result = cli(capsys, "info", str(tmp_path))
    assert result.returncode == 0
    note = f"{tmp_path / 'host.xplane.pb'}: skipped (a JAX/TensorFlow XPlane profile, not a Kineto trace)"
    # Said once, under the table (a table's notes go with it: issue 38).
    assert result.stderr == "" and re.sub(r"\s", "", f"note: {note}") in re.sub(r"\s", "", result.stdout)


def test_tracelens_jax_xplane_is_named(tracelens, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    path = tracelens("tests/traces/mi300/jax_conv_minimal_08/tw003.xplane.pb")
    assert foreign_format(path) is XPLANE
    renamed = path.with_name("tw003.pb")
    renamed.write_bytes(path.read_bytes())
    assert foreign_format(renamed) is XPLANE
    result = cli(capsys, "check", str(path.parent))
    assert result.returncode == 2 and "XPlane profile" in result.stderr


async def test_the_app_names_the_format(tmp_path: Path) -> None:
    from htatui.tui.app import HtaTuiApp, Settings
    from htatui.tui.run import wait_until_loaded
    from htatui.tui.screens.loading import LoadingScreen

    path = _files(tmp_path)["nsys"]
    app = HtaTuiApp(Settings(paths=(path,), max_workers=1))
    async with app.run_test(size=(80, 24)) as pilot:
        assert not await wait_until_loaded(pilot, timeout=60)
        screen = app.screen
        assert isinstance(screen, LoadingScreen)
        assert screen.error_message == NSYS.message(path)
