"""Traces read where they live: S3 through moto's server, HTTP through http.server, both on 127.0.0.1.

Nothing here reaches beyond this machine: AWS_ENDPOINT_URL points at the local moto server, the
credentials are dummies, instance-metadata lookups are off and proxies are bypassed.
"""

from __future__ import annotations

import functools
import http.server
import importlib
import json
import logging
import re
import shutil
import socket
import sys
import tempfile
import threading
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import moto.settings
import pytest
from kineto_util import kernel, runtime, write_trace
from memory_util import memory_trace_events
from moto.server import ThreadedMotoServer

from htatui.cli.main import main
from htatui.jobs.load import load_traces
from htatui.sources import RemotePath, list_folder, open_binary, path_or_url, redact, stat
from htatui.sources import remote as remote_module
from htatui.trace import LoadCancelled
from htatui.trace.fetch import DownloadProgress, fetched

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "fixtures" / "demo"
BUCKET = "traces"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _step(number: int, ts: float, dur: float) -> dict[str, Any]:
    return {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{number}", "pid": 100, "tid": 1, "ts": ts,
            "dur": dur, "args": {}}  # fmt: skip


def tiny_job(folder: Path, kernels_per_rank: int = 1) -> Path:
    """Two ranks: rank r has `kernels_per_rank` + r kernels of 30 µs inside one 100 µs step."""
    for rank in (0, 1):
        events = [_step(1, 0, 100)]
        for i in range(kernels_per_rank + rank):
            events += [runtime("cudaLaunchKernel", 10 + i, 1, corr=i + 1), kernel("gemm", 20 + 30 * i, 30, corr=i + 1)]
        write_trace(folder / f"rank-{rank}.json.gz", events, rank=rank)
    return folder


@dataclass
class S3:
    """The moto server, a boto3 client on it, and the object GETs it has served."""

    endpoint: str
    client: Any
    gets: list[str] = field(default_factory=list)

    def upload(self, folder: Path, prefix: str) -> list[str]:
        keys = []
        for path in sorted(folder.iterdir()):
            key = f"{prefix}/{path.name}"
            self.client.upload_file(str(path), BUCKET, key)
            keys.append(key)
        return keys

    def keys(self) -> list[str]:
        listing = self.client.list_objects_v2(Bucket=BUCKET)
        return sorted(item["Key"] for item in listing.get("Contents", []))


class _GetCounter(logging.Handler):
    """Werkzeug logs one line per request: keep the object GETs (not the bucket listings)."""

    def __init__(self, gets: list[str]) -> None:
        super().__init__()
        self.gets = gets

    def emit(self, record: logging.LogRecord) -> None:
        match = re.search(rf'"GET /{BUCKET}/([^ ?]+)', record.getMessage())
        if match:
            self.gets.append(match.group(1))


@pytest.fixture
def local_only(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Dummy AWS credentials, no config files, no instance metadata, no proxies."""
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing-secret-value")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")


@pytest.fixture
def s3(local_only: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[S3]:
    """moto's S3 server on 127.0.0.1 and a free port, with one empty bucket; stopped after the test."""
    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    gets: list[str] = []
    handler = _GetCounter(gets)
    werkzeug = logging.getLogger("werkzeug")
    werkzeug.addHandler(handler)
    old_level = werkzeug.level
    werkzeug.setLevel(logging.INFO)
    # moto keeps its buckets per process, not per server: start every test from nothing.
    urllib.request.urlopen(urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST"), timeout=10).close()
    try:
        client = boto3.client("s3", endpoint_url=endpoint)
        client.create_bucket(Bucket=BUCKET)
        yield S3(endpoint=endpoint, client=client, gets=gets)
    finally:
        werkzeug.removeHandler(handler)
        werkzeug.setLevel(old_level)
        server.stop()


class _RecordingHandler(http.server.SimpleHTTPRequestHandler):
    requests: list[tuple[str, str]]
    hide_versions: list[bool]

    def send_header(self, keyword: str, value: str) -> None:
        if self.hide_versions and keyword.lower() in ("last-modified", "etag"):
            return
        super().send_header(keyword, value)

    def do_GET(self) -> None:
        self.requests.append(("GET", self.path))
        super().do_GET()

    def do_HEAD(self) -> None:
        self.requests.append(("HEAD", self.path))
        super().do_HEAD()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        return


@dataclass
class Http:
    base: str
    root: Path
    requests: list[tuple[str, str]]
    hide_versions: list[bool]

    def file_gets(self) -> list[str]:
        return [path for method, path in self.requests if method == "GET" and re.search(r"\.json(\.gz)?$", path)]


@pytest.fixture
def http_root(local_only: None, tmp_path: Path) -> Iterator[Http]:
    """A local http.server over a tmp folder, recording every request."""
    root = tmp_path / "www"
    root.mkdir()
    requests: list[tuple[str, str]] = []
    hide_versions: list[bool] = []  # append True to serve without Last-Modified / ETag
    handler = type("Handler", (_RecordingHandler,), {"requests": requests, "hide_versions": hide_versions})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Http(
            base=f"http://127.0.0.1:{server.server_port}", root=root, requests=requests, hide_versions=hide_versions
        )
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# ----------------------------------------------------------------------------- the argument


def test_urls_stay_urls_and_paths_stay_paths() -> None:
    url = path_or_url("s3://bucket/job/")
    assert isinstance(url, RemotePath) and url.url == "s3://bucket/job/" and url.name == "job"
    assert path_or_url("runs/job") == Path("runs/job")
    assert path_or_url("C:/traces") == Path("C:/traces")
    assert RemotePath("gs://bucket").name == "bucket"


def test_secrets_in_urls_are_never_shown() -> None:
    signed = "https://user:pw@host/job/rank-0.json?X-Amz-Signature=abc123&X-Amz-Credential=AKIA"
    shown = redact(f"error reading {signed} now")
    assert "abc123" not in shown and "AKIA" not in shown and "pw" not in shown
    assert shown == "error reading https://…@host/job/rank-0.json?… now"
    assert str(RemotePath(signed)) == "https://…@host/job/rank-0.json?…"


# ----------------------------------------------------------------------------- S3 (moto)


def test_s3_info_and_report_equal_the_local_ones(s3: S3, capsys: pytest.CaptureFixture[str]) -> None:
    s3.upload(DEMO, "demo")
    for command in (["info"], ["report", "--view", "temporal"], ["report", "--view", "kernels", "--top", "5"]):
        local = run(capsys, command[0], str(DEMO), *command[1:], "--format", "json")
        remote = run(capsys, command[0], f"s3://{BUCKET}/demo/", *command[1:], "--format", "json")
        assert local[0] == remote[0] == 0, remote[2]
        assert json.loads(remote[1]) == json.loads(local[1])
    rows = json.loads(run(capsys, "info", f"s3://{BUCKET}/demo", "--format", "json")[1])
    assert [r["rank"] for r in rows] == [0, 1, 2, 3]
    assert [r["file"] for r in rows] == [f"rank-{r}.json.gz" for r in range(4)]


def test_s3_second_open_downloads_nothing(s3: S3, tmp_path: Path) -> None:
    uploaded = s3.upload(tiny_job(tmp_path / "job"), "job")
    url = RemotePath(f"s3://{BUCKET}/job/")
    first = load_traces([url], max_workers=1)
    assert sorted(s3.gets) == uploaded  # each object read once
    assert {r: t.events.height for r, t in first.ranks.items()} == {0: 3, 1: 5}
    s3.gets.clear()
    second = load_traces([url], max_workers=1)
    assert s3.gets == []  # listed, but nothing downloaded: the cache knows URL + ETag + size
    assert {r: t.events.height for r, t in second.ranks.items()} == {0: 3, 1: 5}
    assert [str(t.path) for t in second.ranks.values()] == [f"s3://{BUCKET}/{key}" for key in uploaded]
    load_traces([url], use_cache=False, max_workers=1)
    assert sorted(s3.gets) == uploaded  # --no-cache reads again
    assert s3.keys() == uploaded  # nothing was written beside the traces


def test_s3_changed_object_is_read_again(s3: S3, tmp_path: Path) -> None:
    s3.upload(tiny_job(tmp_path / "job"), "job")
    url = RemotePath(f"s3://{BUCKET}/job/")
    assert load_traces([url], max_workers=1).ranks[1].events.height == 5
    tiny_job(tmp_path / "job", kernels_per_rank=3)  # rank 1: 4 kernels now (new ETag and size)
    s3.client.upload_file(str(tmp_path / "job" / "rank-1.json.gz"), BUCKET, "job/rank-1.json.gz")
    s3.gets.clear()
    traces = load_traces([url], max_workers=1)
    assert s3.gets == ["job/rank-1.json.gz"]
    assert {r: t.events.height for r, t in traces.ranks.items()} == {0: 3, 1: 9}


def test_s3_stat_list_and_open_a_stream(s3: S3, tmp_path: Path) -> None:
    job = tiny_job(tmp_path / "job")
    s3.upload(job, "job")
    folder = stat(RemotePath(f"s3://{BUCKET}/job"))
    assert folder.is_folder and folder.url == f"s3://{BUCKET}/job/"
    entries = list_folder(folder)
    assert [e.name for e in entries] == ["rank-0.json.gz", "rank-1.json.gz"]
    data = (job / "rank-1.json.gz").read_bytes()
    head = s3.client.head_object(Bucket=BUCKET, Key="job/rank-1.json.gz")
    assert entries[1].size == len(data) and entries[1].identity == f"ETag={head['ETag']}"
    assert stat(entries[1]) == entries[1]
    with open_binary(entries[1]) as stream:
        assert stream.read() == data


def test_s3_prefix_follows_the_local_folder_rules(s3: S3, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job = tiny_job(tmp_path / "runs" / "a")
    (job / "notes.txt").write_text("not a trace")
    s3.upload(job, "runs/a")
    s3.upload(tiny_job(tmp_path / "runs" / "b"), "runs/b")
    code, out, err = run(capsys, "info", f"s3://{BUCKET}/runs/a/", "--format", "json")
    assert code == 0 and [r["rank"] for r in json.loads(out)] == [0, 1]
    assert err == f"htatui: note: s3://{BUCKET}/runs/a/notes.txt: skipped (not a trace file name)\n"
    # A prefix of job prefixes is several jobs for `info`, as a folder of folders is.
    code, out, err = run(capsys, "info", f"s3://{BUCKET}/runs", "--format", "json")
    assert code == 0, err
    assert [(r["job"], r["rank"]) for r in json.loads(out)] == [("a", 0), ("a", 1), ("b", 0), ("b", 1)]
    code, out, err = run(capsys, "report", f"s3://{BUCKET}/runs/", "--view", "temporal")
    assert code == 2 and err == f"htatui: s3://{BUCKET}/runs/: no trace files here, only subfolders; open one of them\n"


def test_s3_export_writes_locally_only(s3: S3, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    uploaded = s3.upload(tiny_job(tmp_path / "job"), "job")
    out = tmp_path / "out"
    out.mkdir()
    code, printed, err = run(capsys, "export", "counters", f"s3://{BUCKET}/job/", "-o", str(out))
    assert code == 0, err
    assert sorted(p.name for p in out.iterdir()) == ["rank-0_with_counters.json.gz", "rank-1_with_counters.json.gz"]
    assert s3.keys() == uploaded


def test_s3_diff_against_a_local_job(s3: S3, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job = tiny_job(tmp_path / "job")
    s3.upload(job, "job")
    local = run(capsys, "diff", str(job), str(job), "--format", "json")
    remote = run(capsys, "diff", str(job), f"s3://{BUCKET}/job/", "--format", "json")
    assert local[0] == remote[0] == 0, remote[2]
    assert json.loads(remote[1]) == json.loads(local[1])


# ----------------------------------------------------------------------------- failures: one line, exit 2


def test_missing_object_is_one_line(s3: S3, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    s3.upload(tiny_job(tmp_path / "job"), "job")
    for url in (f"s3://{BUCKET}/job/rank-9.json.gz", "s3://no-such-bucket/job/"):
        code, out, err = run(capsys, "info", url)
        assert (code, out, err) == (2, "", f"htatui: {url}: no such file or folder\n")


def test_a_corrupt_object_among_good_ones_is_named_by_url(
    s3: S3, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = tiny_job(tmp_path / "job")
    good = (job / "rank-1.json.gz").read_bytes()
    (job / "rank-1.json.gz").write_bytes(good[: len(good) // 2])
    s3.upload(job, "job")
    code, out, err = run(capsys, "info", f"s3://{BUCKET}/job/", "--format", "json")
    assert code == 0 and [r["rank"] for r in json.loads(out)] == [0]
    assert err.startswith(f"htatui: skipped s3://{BUCKET}/job/rank-1.json.gz: ") and err.count("\n") == 1


def test_bad_credentials_are_one_line(
    s3: S3, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    s3.upload(tiny_job(tmp_path / "job"), "job")
    url = f"s3://{BUCKET}/job/"
    monkeypatch.setattr(moto.settings, "INITIAL_NO_AUTH_ACTION_COUNT", 0)  # moto checks keys from now on
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAUNKNOWNKEY")
    code, out, err = run(capsys, "report", url, "--view", "temporal")
    assert (code, out) == (2, "")
    assert err == f"htatui: {url}: access denied (check the credentials and permissions for this store)\n"
    assert "testing-secret-value" not in err and "AKIAUNKNOWNKEY" not in err


def test_missing_credentials_are_one_line(
    s3: S3, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    url = f"s3://{BUCKET}/job/"
    code, out, err = run(capsys, "info", url)
    assert (code, out) == (2, "")
    assert err == (
        f"htatui: {url}: no credentials found (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE)\n"
    )


def test_missing_remote_extra_is_one_line(
    local_only: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "s3fs", None)  # as if s3fs were not installed
    registry = importlib.import_module("fsspec.registry")  # the module; `fsspec.registry` is its mapping
    monkeypatch.delitem(registry._registry, "s3", raising=False)
    monkeypatch.setattr(remote_module, "_filesystems", {})
    code, out, err = run(capsys, "info", "s3://bucket/job/")
    assert (code, out) == (2, "")
    assert err == "htatui: s3://bucket/job/: reading s3:// URLs needs the remote extra (pip install 'htatui[remote]')\n"


def test_unknown_scheme_is_one_line(local_only: None, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "report", "nosuchfs://b/j/", "--view", "temporal")
    assert (code, out) == (2, "")
    supported = "s3://, gs://, http:// and https:// are supported"
    assert err == f"htatui: nosuchfs://b/j/: no reader for nosuchfs:// URLs ({supported})\n"


# ----------------------------------------------------------------------------- HTTP (http.server)


def test_http_folder_and_file_equal_the_local_ones(
    http_root: Http, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copytree(DEMO, http_root.root / "demo")
    local = run(capsys, "info", str(DEMO), "--format", "json")
    for url in (f"{http_root.base}/demo/", f"{http_root.base}/demo"):
        remote = run(capsys, "info", url, "--format", "json")
        assert remote[0] == 0, remote[2]
        assert json.loads(remote[1]) == json.loads(local[1])
    one = run(capsys, "report", f"{http_root.base}/demo/rank-2.json.gz", "--view", "temporal", "--format", "json")
    assert json.loads(one[1]) == json.loads(run(capsys, "report", str(DEMO / "rank-2.json.gz"), "--view", "temporal",
                                                "--format", "json")[1])  # fmt: skip


def test_http_memory_equals_the_local_one(http_root: Http, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A job's [memory] events read again through the URL (no local file): `htatui memory URL`
    and `report URL --view memory` answer as for the local folder."""
    for folder in (tmp_path / "job", http_root.root / "job"):
        write_trace(folder / "rank-0.pt.trace.json", memory_trace_events())
    for command in (["memory"], ["report", "--view", "memory", "--sites"]):
        local = run(capsys, command[0], str(tmp_path / "job"), *command[1:], "--format", "json")
        remote = run(capsys, command[0], f"{http_root.base}/job/", *command[1:], "--format", "json")
        assert local[0] == remote[0] == 0, remote[2]
        rows = [{k: v for k, v in row.items() if k != "source"} for row in json.loads(remote[1])]
        assert rows == [{k: v for k, v in row.items() if k != "source"} for row in json.loads(local[1])] != []


def test_http_second_open_downloads_nothing(http_root: Http, tmp_path: Path) -> None:
    tiny_job(http_root.root / "job")
    url = RemotePath(f"{http_root.base}/job/")
    load_traces([url], max_workers=1)
    assert sorted(http_root.file_gets()) == ["/job/rank-0.json.gz", "/job/rank-1.json.gz"]
    http_root.requests.clear()
    traces = load_traces([url], max_workers=1)
    assert http_root.file_gets() == []  # HEAD gave the same size and Last-Modified
    assert {r: t.events.height for r, t in traces.ranks.items()} == {0: 3, 1: 5}


def test_http_without_a_version_is_never_cached(http_root: Http, isolated_cache: Path) -> None:
    tiny_job(http_root.root / "job")
    http_root.hide_versions.append(True)
    url = RemotePath(f"{http_root.base}/job/")
    for _ in range(2):
        http_root.requests.clear()
        traces = load_traces([url], max_workers=1)
        assert {r: t.events.height for r, t in traces.ranks.items()} == {0: 3, 1: 5}
        assert sorted(http_root.file_gets()) == ["/job/rank-0.json.gz", "/job/rank-1.json.gz"]
    assert list(isolated_cache.iterdir()) == []


def test_an_object_replaced_after_listing_is_refused(s3: S3, tmp_path: Path) -> None:
    job = tiny_job(tmp_path / "job")
    s3.upload(job, "job")
    listed = list_folder(RemotePath(f"s3://{BUCKET}/job/"))[1]
    s3.client.put_object(Bucket=BUCKET, Key="job/rank-1.json.gz", Body=b"{}")
    with fetched([listed]) as ready:
        assert ready.files == []
        assert [str(p) for p in ready.problems] == [
            f"s3://{BUCKET}/job/rank-1.json.gz: changed while it was read ({listed.size} bytes listed, 2 received)"
        ]


def test_cancel_during_download_leaves_nothing_behind(
    http_root: Http, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tiny_job(http_root.root / "job")
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    cancel = threading.Event()
    seen: list[int] = []

    def progress(update: DownloadProgress) -> None:
        seen.append(update.done_bytes)
        cancel.set()  # the user pressed esc as soon as bytes started to flow

    with pytest.raises(LoadCancelled):
        load_traces([RemotePath(f"{http_root.base}/job/")], cancel=cancel, download_progress=progress, max_workers=1)
    assert seen and list(temp.iterdir()) == []


def test_http_missing_file_and_signed_url_are_one_line(http_root: Http, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"{http_root.base}/gone/rank-0.json"
    assert run(capsys, "info", url) == (2, "", f"htatui: {url}: no such file or folder\n")
    code, out, err = run(capsys, "info", f"{url}?X-Amz-Signature=sekrit")
    assert (code, out, err) == (2, "", f"htatui: {url}?…: no such file or folder\n")


# ----------------------------------------------------------------------------- the app


async def test_app_opens_a_url_and_names_a_bad_one(http_root: Http) -> None:
    from htatui.tui.app import HtaTuiApp, Settings
    from htatui.tui.run import wait_until_loaded
    from htatui.tui.screens.loading import LoadingScreen

    tiny_job(http_root.root / "job")
    app = HtaTuiApp(Settings(paths=(RemotePath(f"{http_root.base}/job/"),), max_workers=1))
    async with app.run_test(size=(80, 24)) as pilot:
        assert await wait_until_loaded(pilot, timeout=60)
        assert app.current_mode == "diagnosis"  # the page the app opens on
        assert app.traces is not None and app.traces.rank_ids == [0, 1]
    missing = f"{http_root.base}/nothing/"
    app = HtaTuiApp(Settings(paths=(RemotePath(missing),), max_workers=1))
    async with app.run_test(size=(80, 24)) as pilot:
        assert not await wait_until_loaded(pilot, timeout=60)
        screen = app.screen
        assert isinstance(screen, LoadingScreen) and screen.error_message == f"{missing}: no such file or folder"
