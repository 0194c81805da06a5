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

REPO = Path(__file__).resolve().parents[1]
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
