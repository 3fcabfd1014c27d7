"""What the harness formats (claude-code, codex) share: attachments (images
and documents carried inline as base64 or data URLs, or named by a path, of
which only metadata is kept: an id, a name, a media type and a size; the bytes
never enter the index), and JSON values as text."""

from __future__ import annotations

import hashlib
import mimetypes
import posixpath
import re

import orjson
from pydantic import ValidationError

from ...model import Attachment

_ID_OK = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
_DATA_URL = re.compile(r"^data:([^;,]*)(;[^,]*)?,", re.IGNORECASE)
_EXT = {"image/png": "png", "image/jpeg": "jpg", "image/gif": "gif", "image/webp": "webp",
        "image/svg+xml": "svg", "application/pdf": "pdf", "text/plain": "txt"}


def json_text(value) -> str:
    """A decoded JSON value back as JSON text (for the projection to take its
    values from); never raises."""
    if value is None:
        return ""
    try:
        return orjson.dumps(value).decode()
    except (TypeError, orjson.JSONEncodeError):
        return str(value)


def stable_id(*parts: str) -> str:
    """A short id made from `parts`, the same on every read."""
    h = hashlib.blake2b(digest_size=10)
    for p in parts:
        h.update(p.encode("utf-8", "replace"))
        h.update(b"\x00")
    return h.hexdigest()


def base64_size(data: str) -> int:
    """The decoded size of base64 text, from its length alone."""
    n = len(data.strip())
    if n == 0:
        return 0
    pad = len(data) - len(data.rstrip("=")) if data.endswith("=") else 0
    return max(0, n * 3 // 4 - min(pad, 2))


def extension(mime: str) -> str:
    return _EXT.get(mime) or (mimetypes.guess_extension(mime) or ".bin").lstrip(".")


def make(block_id: object, fallback_id: str, name: str, mime: str, size: int) -> Attachment | None:
    """An Attachment, or None when the values cannot make a valid one."""
    aid = block_id if isinstance(block_id, str) and _ID_OK.match(block_id) else fallback_id
    try:
        return Attachment(id=aid, name=name, mime_type=mime or "application/octet-stream", bytes=max(0, size))
    except ValidationError:
        return None


def from_data_url(url: str, fallback_id: str, n: int) -> Attachment | None:
    """`data:image/png;base64,...` -> an attachment named image-N.png."""
    m = _DATA_URL.match(url)
    if m is None:
        return None
    mime = (m.group(1) or "application/octet-stream").lower()
    payload = url[m.end():]
    size = base64_size(payload) if m.group(2) and "base64" in m.group(2).lower() else len(payload)
    kind = "image" if mime.startswith("image/") else "file"
    return make(None, fallback_id, f"{kind}-{n}.{extension(mime)}", mime, size)


def from_path(path: str, fallback_id: str) -> Attachment | None:
    """A local file named by its path: its base name, a media type guessed
    from it, and an unknown size (0)."""
    name = posixpath.basename(path.replace("\\", "/")) or path
    mime = mimetypes.guess_type(name)[0] or "application/octet-stream"
    return make(None, fallback_id, name, mime, 0)
