"""Remote stores through fsspec: look at a URL, list a prefix, open or download an object.

fsspec and its store packages (s3fs, gcsfs; aiohttp for http) are imported on first use, so a
local-only install never needs them. Credentials and endpoints come from each store's usual
places (for S3 the AWS_* variables, AWS_ENDPOINT_URL included); nothing here reads, takes or
prints them. Every failure is a SourceError whose message is one line naming the URL.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

from htatui.errors import Cancelled, HtatuiError
from htatui.sources.location import RemotePath, redact

REMOTE_EXTRA_HINT = "pip install 'htatui[remote]'"

# Seconds to wait for a store to accept a connection / send the next bytes: a dead endpoint
# fails within a minute instead of hanging on the libraries' defaults.
CONNECT_TIMEOUT_S = 10
READ_TIMEOUT_S = 60
TIMEOUT_ENV = "HTATUI_REMOTE_TIMEOUT_S"
"""Overrides READ_TIMEOUT_S; it also bounds a metadata request (HEAD, a listing) as a whole."""


DEADLINE_S = 3600
DEADLINE_ENV = "HTATUI_REMOTE_DEADLINE_S"
"""The longest one remote file's download may take, however steadily its bytes arrive."""
MIN_BYTES_PER_S = 10_000
MIN_RATE_ENV = "HTATUI_REMOTE_MIN_BYTES_PER_S"
"""The slowest average a download may keep over each read-timeout window (0 turns the check off):
a server that sends 64 bytes every 2 s never trips the read timeout."""


def _seconds_from_env(name: str, default: float) -> float:
    try:
        value = float(os.environ.get(name, ""))
    except ValueError:
        return default
    return value if 0 < value < 86_400 * 7 else default


def read_timeout_s() -> float:
    """Seconds to wait for a store's next bytes, and for a whole metadata request."""
    value = _seconds_from_env(TIMEOUT_ENV, READ_TIMEOUT_S)
    return value if value < 86_400 else READ_TIMEOUT_S


def deadline_s() -> float:
    """Seconds one download may take in all (HTATUI_REMOTE_DEADLINE_S, default an hour)."""
    return _seconds_from_env(DEADLINE_ENV, DEADLINE_S)


def min_bytes_per_s() -> float:
    """The minimum average rate of a download (HTATUI_REMOTE_MIN_BYTES_PER_S; 0 for none)."""
    try:
        value = float(os.environ.get(MIN_RATE_ENV, ""))
    except ValueError:
        return MIN_BYTES_PER_S
    return value if 0 <= value < float("inf") else MIN_BYTES_PER_S


# Keys of an fsspec info() record that tell one version of an object from another, best first:
# GCS generation, S3 version id, then ETags, then modification times (HTTP servers without ETags).
_IDENTITY_KEYS = (
    "generation",
    "VersionId",
    "version_id",
    "ETag",
    "etag",
    "md5Hash",
    "Last-Modified",
    "LastModified",
    "last_modified",
    "updated",
    "mtime",
)
_CREDENTIAL_ERRORS = (
    "NoCredentialsError",
    "PartialCredentialsError",
    "CredentialRetrievalError",
    "DefaultCredentialsError",
    "RefreshError",
)
_UNREACHABLE_ERRORS = (
    "EndpointConnectionError",
    "ConnectTimeoutError",
    "ReadTimeoutError",
    "ClientConnectorError",
    "ClientConnectionError",
    "ServerDisconnectedError",
    "ServerTimeoutError",
    "ConnectionClosedError",
)
_CONNECT_ERRORS = frozenset(
    {
        "EndpointConnectionError",
        "ConnectTimeoutError",
        "ConnectionTimeoutError",
        "ClientConnectorError",
        "ClientConnectorDNSError",
        "ClientConnectorCertificateError",
        "ConnectionRefusedError",
    }
)
"""Failures to connect at all (refused, no route, DNS, TLS), found anywhere in the cause chain."""
_CREDENTIAL_HINTS = {
    "s3": "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE",
    "gs": "run `gcloud auth application-default login` or set GOOGLE_APPLICATION_CREDENTIALS",
}


class SourceError(HtatuiError):
    """A URL cannot be used; the message is one line naming it (never a credential)."""


class _Pace:
    """A download's total deadline and minimum rate, checked as its bytes arrive.

    The rate is the average over windows as long as the read timeout: a slow start or a
    pause shorter than that is allowed, a trickle is not.
    """

    def __init__(self, path: RemotePath) -> None:
        self.path = path
        self.started = self.window_start = time.monotonic()
        self.window_bytes = 0
        self.deadline = deadline_s()
        self.window = read_timeout_s()
        self.min_rate = min_bytes_per_s()

    def check(self, received: int) -> None:
        now = time.monotonic()
        if now - self.started > self.deadline:
            raise SourceError(
                f"{self.path}: still downloading after {self.deadline:g} s ({received:,} bytes received; "
                f"{DEADLINE_ENV} sets the limit)"
            )
        elapsed = now - self.window_start
        if elapsed < self.window:
            return
        rate = (received - self.window_bytes) / elapsed
        if rate < self.min_rate:
            raise SourceError(
                f"{self.path}: the store sent {rate:,.0f} bytes/s over the last {elapsed:.0f} s, under the "
                f"minimum of {self.min_rate:,.0f} ({MIN_RATE_ENV} sets it)"
            )
        self.window_start, self.window_bytes = now, received


ProgressHook = Callable[[int], None]
"""Called with the number of bytes received so far for one object."""


def _store(protocol: str) -> str:
    return {"s3a": "s3", "gcs": "gs"}.get(protocol, protocol)


def describe_error(path: RemotePath, exc: BaseException) -> SourceError:
    """One line for a failure on `path`: what went wrong in words, without library noise."""
    name = type(exc).__name__
    store = _store(path.protocol)
    status = _http_status(exc)
    unreachable = next((type(c).__name__ for c in _causes(exc) if type(c).__name__ in _CONNECT_ERRORS), None)
    if any(type(c).__name__ == "TooManyRedirects" for c in _causes(exc)):
        reason = "redirect loop (the server redirected it too many times)"
    elif unreachable is not None:
        # fsspec's HTTP reader raises FileNotFoundError from whatever its requests raised.
        reason = f"cannot reach the store ({unreachable})"
    elif _timed_out(exc):
        reason = f"the store did not answer within {read_timeout_s():g} s ({TIMEOUT_ENV} sets the limit)"
    elif status is not None and status != 404:
        reason = f"HTTP {status}" + {401: " (unauthorised)", 403: " (access denied)"}.get(
            status, " (server error)" if status >= 500 else ""
        )
    elif isinstance(exc, ImportError):
        reason = f"reading {path.protocol}:// URLs needs the remote extra ({REMOTE_EXTRA_HINT})"
    elif isinstance(exc, ValueError) and "protocol not known" in str(exc).lower():
        reason = f"no reader for {path.protocol}:// URLs (s3://, gs://, http:// and https:// are supported)"
    elif isinstance(exc, FileNotFoundError):
        reason = "no such file or folder"
    elif name in _CREDENTIAL_ERRORS:
        hint = _CREDENTIAL_HINTS.get(store, "configure this store's credentials")
        reason = f"no credentials found ({hint})"
    elif isinstance(exc, PermissionError):
        reason = "access denied (check the credentials and permissions for this store)"
    elif name in _UNREACHABLE_ERRORS or isinstance(exc, (ConnectionError, TimeoutError)):
        reason = f"cannot reach the store ({name})"
    else:
        detail = redact(str(exc).strip().splitlines()[0] if str(exc).strip() else "")[:200]
        reason = f"cannot be read ({name}{': ' + detail if detail else ''})"
    return SourceError(f"{path}: {reason}")


def _causes(exc: BaseException) -> list[BaseException]:
    """The exception and what it was raised from (fsspec's HTTP reader raises FileNotFoundError
    from the response's error, whatever the status was)."""
    chain: list[BaseException] = []
    seen: BaseException | None = exc
    while seen is not None and len(chain) < 8:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    return chain


def _http_status(exc: BaseException) -> int | None:
    for cause in _causes(exc):
        status = getattr(cause, "status", None)
        if isinstance(status, int) and 400 <= status < 600:
            return status
    return None


def _timed_out(exc: BaseException) -> bool:
    return any(isinstance(c, TimeoutError) or type(c).__name__ == "FSTimeoutError" for c in _causes(exc))


def _deadline(fs: Any) -> dict[str, float]:
    """A limit on a whole metadata call: fsspec's async stores take `timeout` for the call (an
    HTTP server that accepts and never answers would otherwise be waited on per request, HEAD
    then GET)."""
    return {"timeout": read_timeout_s()} if getattr(fs, "async_impl", False) else {}


_filesystems: dict[tuple[str, int], Any] = {}
_filesystems_lock = threading.Lock()


def _environment_fingerprint() -> int:
    """Changes when a variable that picks the endpoint or the credentials changes (never stored)."""
    prefixes = ("AWS_", "GOOGLE_", "GCS", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", TIMEOUT_ENV)
    relevant = sorted((k, v) for k, v in os.environ.items() if k.upper().startswith(prefixes))
    return hash(tuple(relevant))


def _options(protocol: str) -> dict[str, Any]:
    """Timeouts, and no listing cache: a listing must show the store as it is now."""
    store = _store(protocol)
    if store == "s3":
        return {
            "use_listings_cache": False,
            "config_kwargs": {"connect_timeout": CONNECT_TIMEOUT_S, "read_timeout": read_timeout_s()},
        }
    if store in ("http", "https"):
        import aiohttp

        timeout = aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT_S, sock_read=read_timeout_s())
        return {"use_listings_cache": False, "client_kwargs": {"timeout": timeout}}
    if store == "gs":
        return {"use_listings_cache": False}
    return {}


def filesystem(protocol: str) -> Any:
    """The fsspec filesystem for `protocol`, made once per process and environment."""
    key = (protocol, _environment_fingerprint())
    with _filesystems_lock:
        if key not in _filesystems:
            import fsspec

            _filesystems[key] = fsspec.filesystem(protocol, skip_instance_cache=True, **_options(protocol))
        return _filesystems[key]


def identity_of(info: Mapping[str, Any]) -> str | None:
    """`key=value` for the first version marker in an fsspec info record, or None."""
    for key in _IDENTITY_KEYS:
        value = info.get(key)
        if value not in (None, ""):
            return f"{key}={value}"
    return None


def _entry(fs: Any, info: Mapping[str, Any]) -> RemotePath:
    url = str(fs.unstrip_protocol(info["name"]))
    if info.get("type") == "directory":
        return RemotePath(url.rstrip("/") + "/", is_folder=True)
    size = info.get("size")
    return RemotePath(url, size=int(size) if size is not None else None, identity=identity_of(info))


def _looks_like_folder(fs: Any, path: RemotePath, info: Mapping[str, Any]) -> bool:
    """A store's folder, or for HTTP a URL ending in `/` or answered by an HTML index page."""
    if info.get("type") == "directory":
        return True
    if _store(path.protocol) in ("http", "https"):
        return path.url.endswith("/") or str(info.get("mimetype", "")).startswith("text/html")
    return False


_unanswered: dict[str, tuple[float, SourceError]] = {}
"""URLs whose metadata request timed out, and when: asked again (by the next step of the same
command) within the timeout, they fail at once instead of making the user wait twice."""


def _followed(path: RemotePath, entry: RemotePath, info: Mapping[str, Any]) -> RemotePath:
    """The final URL of an HTTP redirect to another host: it, not the first, is read and cached."""
    final = info.get("url")
    if not isinstance(final, str) or not final or urlsplit(final).netloc == urlsplit(path.url).netloc:
        return entry
    return replace(entry, url=final, redirected_from=path.url)


def stat(path: RemotePath) -> RemotePath:
    """`path` with its size and identity, or marked as a folder (prefix)."""
    recent = _unanswered.get(path.url)
    if recent is not None and time.monotonic() - recent[0] < read_timeout_s():
        raise recent[1]
    try:
        fs = filesystem(path.protocol)
        info = fs.info(path.url, **_deadline(fs))
        if _looks_like_folder(fs, path, info):
            return RemotePath(path.url.rstrip("/") + "/", is_folder=True)
        return _followed(path, _entry(fs, info), info)
    except Exception as exc:  # noqa: BLE001 - every store's failure becomes one line
        error = describe_error(path, exc)
        if _timed_out(exc):
            _unanswered[path.url] = (time.monotonic(), error)
        raise error from None


def list_folder(folder: RemotePath) -> list[RemotePath]:
    """The files and subfolders directly under `folder`, in name order (not recursive)."""
    try:
        fs = filesystem(folder.protocol)
        infos = fs.ls(
            folder.url, detail=True, **(_deadline(fs) if _store(folder.protocol) in ("http", "https") else {})
        )
        entries = [_entry(fs, info) for info in infos]
    except Exception as exc:  # noqa: BLE001 - every store's failure becomes one line
        raise describe_error(folder, exc) from None
    own = folder.url.rstrip("/")
    entries = [e for e in entries if e.url.rstrip("/") != own]
    return sorted(entries, key=lambda e: e.name)


def open_binary(path: RemotePath, block_size: int | None = None) -> IO[bytes]:
    """A read-only byte stream over the object (ranged reads where the store allows them)."""
    try:
        fs = filesystem(path.protocol)
        kwargs = {} if block_size is None else {"block_size": block_size}
        return fs.open(path.url, "rb", **kwargs)  # type: ignore[no-any-return]
    except Exception as exc:  # noqa: BLE001 - every store's failure becomes one line
        raise describe_error(path, exc) from None


class DownloadCancelled(Cancelled):
    """The progress hook asked to stop."""


def download(path: RemotePath, target: Path, progress: ProgressHook | None = None) -> int:
    """Stream the object into the local file `target` (one GET); return the bytes written.

    `progress` gets the running byte count; it may raise DownloadCancelled to stop.
    A size different from the listed one means the object changed since: an error.
    """
    from fsspec.callbacks import Callback

    pace = _Pace(path)

    def hook(_size: int | None, value: int) -> None:
        pace.check(value)
        if progress is not None:
            progress(value)

    callback = Callback(hooks={"progress": hook})
    try:
        fs = filesystem(path.protocol)
        fs.get_file(path.url, str(target), callback=callback)
        written = target.stat().st_size
    except (DownloadCancelled, SourceError):
        raise
    except Exception as exc:  # noqa: BLE001 - every store's failure becomes one line
        raise describe_error(path, exc) from None
    if path.size is not None and written != path.size:
        raise SourceError(f"{path}: changed while it was read ({path.size} bytes listed, {written} received)")
    return written
