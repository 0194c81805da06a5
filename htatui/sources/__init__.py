"""Where traces come from: local paths and fsspec URLs (s3://, gs://, https://, http://).

Only this package knows URLs. Local paths keep their plain `Path` behaviour everywhere else;
a URL travels as a `RemotePath` (its URL, and once looked at, its size and version identity).
fsspec and the store packages are optional (`pip install 'htatui[remote]'`) and imported lazily.
"""

from htatui.sources.location import RemotePath, SourcePath, is_url, path_or_url, redact
from htatui.sources.remote import (
    DownloadCancelled,
    SourceError,
    download,
    list_folder,
    open_binary,
    stat,
)


def cache_identity(path: RemotePath) -> str | None:
    """What a cache key must cover for a remote file: URL, version identity and size; None if unknown."""
    if path.identity is None or path.size is None:
        return None
    return f"{path.url}|{path.identity}|{path.size}"


__all__ = [
    "DownloadCancelled",
    "RemotePath",
    "SourceError",
    "SourcePath",
    "cache_identity",
    "download",
    "is_url",
    "list_folder",
    "open_binary",
    "path_or_url",
    "redact",
    "stat",
]
