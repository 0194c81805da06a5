"""Where a trace lives: a local path or a URL. Pure data; nothing here touches the network."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

# `scheme://` with a scheme of two letters or more, so `C://x` style drive paths stay local.
_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+)://")
_QUERY_IN_TEXT = re.compile(r"((?:[A-Za-z][A-Za-z0-9+.-]+)://[^\s?'\"]*)\?[^\s'\"]*")
_USERINFO_IN_TEXT = re.compile(r"((?:[A-Za-z][A-Za-z0-9+.-]+)://)[^/\s@'\"]*@")


def is_url(text: str) -> bool:
    """True for `s3://…`, `gs://…`, `https://…` and any other `scheme://` text."""
    return _URL.match(text) is not None


def protocol_of(url: str) -> str:
    match = _URL.match(url)
    return match.group(1).lower() if match else "file"


def redact(text: str) -> str:
    """`text` with URL query strings and user:password@ parts cut: signed URLs carry secrets there."""
    return _USERINFO_IN_TEXT.sub(r"\1…@", _QUERY_IN_TEXT.sub(r"\1?…", text))


@dataclass(frozen=True)
class RemotePath:
    """A URL named by the user or found under a prefix.

    `size` and `identity` (the store's ETag, generation, version id or Last-Modified) are filled in
    once the object has been looked at; `str()` is the URL with any secret parts cut, for messages.
    A file redirected to another host is the final URL: read, cached and named as that.
    """

    url: str
    size: int | None = None
    identity: str | None = None
    is_folder: bool = False
    redirected_from: str | None = field(default=None, compare=False)
    """The URL the user (or a listing) named, when the server redirected it to another host."""

    @property
    def protocol(self) -> str:
        return protocol_of(self.url)

    @property
    def name(self) -> str:
        """The last segment of the URL's path, like Path.name (the bucket for a bare bucket URL)."""
        parts = urlsplit(self.url)
        path = parts.path.rstrip("/")
        return unquote(path.rsplit("/", 1)[-1]) if path else parts.netloc

    def __str__(self) -> str:
        return redact(self.url)


SourcePath = Path | RemotePath
"""A trace file or folder the user named: local, or remote through fsspec."""


def path_or_url(text: str) -> SourcePath:
    """The command line's PATH argument: a URL stays a URL (Path would fold its `//`), else a Path."""
    return RemotePath(text) if is_url(text) else Path(text)
