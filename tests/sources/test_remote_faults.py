"""Remote faults name their real cause (issue 22): a server that accepts and never answers is
given up on within the configured timeout (once, not per request); an HTTP 500 is "HTTP 500",
not "no such file or folder"; a gzip bomb of zeros is zeros, not "UTF-16 text". Each runs the CLI
in a subprocess (with a timeout) against a local server in a thread."""

from __future__ import annotations

import gzip
import http.server
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ZEROS = 64 * 2**20
BOMB = gzip.compress(b"\0" * ZEROS, compresslevel=9)


def info(url: str, tmp_path: Path, **env: str) -> tuple[int, str, float]:
    """`htatui info URL`: exit code, stderr, seconds taken."""
    clean = {k: v for k, v in os.environ.items() if k.lower() not in ("http_proxy", "https_proxy")}
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "htatui", "info", url],
        env={**clean, "PYTHONPATH": str(REPO), "HTATUI_CACHE_DIR": str(tmp_path / "cache"), "NO_PROXY": "*", **env},
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert "Traceback" not in done.stderr and done.stdout == ""
    return done.returncode, done.stderr.strip(), time.monotonic() - started


@pytest.fixture
def silent_server() -> Iterator[int]:
    """Accepts connections, reads nothing, answers nothing."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    stop.set()
    thread.join(5)
    for conn in held:
        conn.close()
    listener.close()


class _Answers(http.server.BaseHTTPRequestHandler):
    def do_HEAD(self) -> None:
        self._answer(body=False)

    def do_GET(self) -> None:
        self._answer(body=True)

    def _answer(self, body: bool) -> None:
        if self.path.startswith("/broken"):
            self.send_response(500)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(BOMB)))
        self.end_headers()
        if body:
            self.wfile.write(BOMB)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        pass


@pytest.fixture
def answering_server() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Answers)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_a_server_that_never_answers_times_out_within_the_limit(silent_server: int, tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{silent_server}/trace.json.gz"
    code, err, seconds = info(url, tmp_path, HTATUI_REMOTE_TIMEOUT_S="2")
    assert code == 2
    assert err == f"htatui: {url}: the store did not answer within 2 s (HTATUI_REMOTE_TIMEOUT_S sets the limit)"
    # 2 s once (before: HEAD then GET, each waited on for the read timeout: past 100 s), plus start-up.
    assert seconds < 2 + 15


def test_http_500_is_named(answering_server: int, tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{answering_server}/broken/trace.json"
    code, err, _ = info(url, tmp_path)
    assert (code, err) == (2, f"htatui: {url}: HTTP 500 (server error)")


@pytest.mark.parametrize("cap", [None, str(ZEROS // 2)])
def test_a_gzip_bomb_of_zeros_is_named_zeros(answering_server: int, tmp_path: Path, cap: str | None) -> None:
    url = f"http://127.0.0.1:{answering_server}/trace.json.gz"
    extra = {} if cap is None else {"HTATUI_MAX_TRACE_BYTES": cap}
    code, err, _ = info(url, tmp_path, **extra)
    assert (code, err) == (2, f"htatui: {url}: starts with zero bytes, not JSON text")


def test_a_local_file_of_zeros_is_not_called_utf16(tmp_path: Path) -> None:
    path = tmp_path / "zeros.json.gz"
    path.write_bytes(BOMB)
    code, err, _ = info(str(path), tmp_path)
    assert (code, err) == (2, f"htatui: {path}: starts with zero bytes, not JSON text")


def test_a_refused_connection_is_not_a_missing_file(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port nothing listens on once this closes
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/trace.json"
    code, err, _ = info(url, tmp_path)
    assert (code, err) == (2, f"htatui: {url}: cannot reach the store (ClientConnectorError)")


# Issue 35: a trickling server, an index page with one bad link, redirect loops and other hosts.

TRICKLE_BYTES = 64


class _Trickle(http.server.BaseHTTPRequestHandler):
    """`/trickle.json`: a 10 MB trace sent 64 bytes every 0.2 s; `/idx/`: an index of a good and
    a broken file; `/loop.json` redirects to itself; `/moved.json` to the other server's `/trace.json`."""

    trace = b""
    other_port = 0

    def do_HEAD(self) -> None:
        self._answer(body=False)

    def do_GET(self) -> None:
        self._answer(body=True)

    def _send(self, status: int, body: bytes, send_body: bool, kind: str = "application/json", **headers: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        if send_body:
            self.wfile.write(body)

    def _answer(self, body: bool) -> None:
        if self.path == "/trickle.json":
            self.send_response(200)
            self.send_header("Content-Length", str(10 * 2**20))
            self.end_headers()
            for _ in range(600 if body else 0):  # at most two minutes, whoever is reading
                try:
                    self.wfile.write(b" " * TRICKLE_BYTES)
                    self.wfile.flush()
                except OSError:
                    return
                time.sleep(0.2)
        elif self.path == "/idx/":
            page = b'<html><a href="rank0.json">rank0.json</a> <a href="rank1.json">rank1.json</a></html>'
            self._send(200, page, body, kind="text/html")
        elif self.path in ("/idx/rank0.json", "/trace.json"):
            self._send(200, self.trace, body)
        elif self.path == "/idx/rank1.json":
            self._send(500, b"", body)
        elif self.path == "/loop.json":
            self._send(302, b"", body, Location="/loop.json")
        elif self.path == "/moved.json":
            self._send(302, b"", body, Location=f"http://127.0.0.1:{self.other_port}/trace.json")
        else:
            self._send(404, b"", body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        pass


def _serve(handler: type[http.server.BaseHTTPRequestHandler]) -> tuple[http.server.ThreadingHTTPServer, int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, server.server_address[1]


@pytest.fixture
def trickle_servers(tmp_path: Path) -> Iterator[tuple[int, int]]:
    """Two servers of `_Trickle` (the second is "another host" for redirects)."""
    from kineto_util import kernel, runtime, step, write_trace

    events = [step(1, 0, 100), runtime("cudaLaunchKernel", 10, 5, corr=1), kernel("gemm", 20, 30, corr=1)]
    trace = write_trace(tmp_path / "src" / "t.json", events).read_bytes()
    handler = type("Handler", (_Trickle,), {"trace": trace})
    first, first_port = _serve(handler)
    second, second_port = _serve(handler)
    handler.other_port = second_port  # type: ignore[attr-defined]
    yield first_port, second_port
    for server in (first, second):
        server.shutdown()
        server.server_close()


def test_a_trickling_server_is_given_up_under_the_minimum_rate(
    trickle_servers: tuple[int, int], tmp_path: Path
) -> None:
    """Before: 64 bytes every 2 s kept `info URL` running for ~38 minutes (every read within the timeout)."""
    url = f"http://127.0.0.1:{trickle_servers[0]}/trickle.json"
    code, err, seconds = info(url, tmp_path, HTATUI_REMOTE_TIMEOUT_S="2")
    assert code == 2
    assert err.startswith(f"htatui: {url}: the store sent ") and "bytes/s over the last 2 s, under the minimum" in err
    assert "HTATUI_REMOTE_MIN_BYTES_PER_S sets it" in err and "\n" not in err
    assert seconds < 2 + 15


def test_a_download_past_the_deadline_is_given_up(trickle_servers: tuple[int, int], tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{trickle_servers[0]}/trickle.json"
    code, err, seconds = info(url, tmp_path, HTATUI_REMOTE_MIN_BYTES_PER_S="0", HTATUI_REMOTE_DEADLINE_S="3")
    assert code == 2
    assert err.startswith(f"htatui: {url}: still downloading after 3 s (") and "HTATUI_REMOTE_DEADLINE_S" in err
    assert seconds < 3 + 15


def test_an_index_page_with_one_bad_link_loads_the_rest(trickle_servers: tuple[int, int], tmp_path: Path) -> None:
    """Before: the HTTP 500 of one listed file failed the whole folder; a local folder skips it."""
    url = f"http://127.0.0.1:{trickle_servers[0]}/idx/"
    clean = {k: v for k, v in os.environ.items() if k.lower() not in ("http_proxy", "https_proxy")}
    done = subprocess.run(
        [sys.executable, "-m", "htatui", "info", url, "--format", "csv"],
        env={**clean, "PYTHONPATH": str(REPO), "HTATUI_CACHE_DIR": str(tmp_path / "cache"), "NO_PROXY": "*"},
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 0, done.stderr
    assert f"htatui: skipped {url}rank1.json: HTTP 500 (server error)" in done.stderr.splitlines()
    (_header, row) = done.stdout.strip().splitlines()
    assert row.startswith("0,rank0.json,")


def test_a_redirect_loop_is_named(trickle_servers: tuple[int, int], tmp_path: Path) -> None:
    """Before: "no such file or folder"."""
    url = f"http://127.0.0.1:{trickle_servers[0]}/loop.json"
    code, err, _ = info(url, tmp_path)
    assert (code, err) == (2, f"htatui: {url}: redirect loop (the server redirected it too many times)")


def test_a_redirect_to_another_host_is_named_and_read_as_the_final_url(
    trickle_servers: tuple[int, int], tmp_path: Path
) -> None:
    """Before: followed silently, named and cached as the first URL."""
    from htatui.sources import RemotePath, cache_identity, stat

    first, final = (f"http://127.0.0.1:{port}" for port in trickle_servers)
    looked_at = stat(RemotePath(f"{first}/moved.json"))
    assert (looked_at.url, looked_at.redirected_from) == (f"{final}/trace.json", f"{first}/moved.json")
    assert str(cache_identity(looked_at) or looked_at.url).startswith(f"{final}/trace.json")
    clean = {k: v for k, v in os.environ.items() if k.lower() not in ("http_proxy", "https_proxy")}
    done = subprocess.run(
        [sys.executable, "-m", "htatui", "info", f"{first}/moved.json", "--format", "csv"],
        env={**clean, "PYTHONPATH": str(REPO), "HTATUI_CACHE_DIR": str(tmp_path / "cache"), "NO_PROXY": "*"},
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 0, done.stderr
    note = f"htatui: note: {first}/moved.json: redirected to another host; read and cached as {final}/trace.json"
    assert note in done.stderr.splitlines()
    assert ",trace.json," in done.stdout and "moved.json" not in done.stdout
