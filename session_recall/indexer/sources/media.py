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
from ...text.redact import find_secret

_ID_OK = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
_DATA_URL = re.compile(r"^data:([^;,]*)(;[^,]*)?,", re.IGNORECASE)
_EXT = {"image/png": "png", "image/jpeg": "jpg", "image/gif": "gif", "image/webp": "webp",
        "image/svg+xml": "svg", "application/pdf": "pdf", "text/plain": "txt"}


class _Raw(str):
    """Text already encoded, on json_dumps' stack."""


def json_dumps(value, sort_keys: bool = False) -> str:
    """A decoded JSON value as JSON text, whatever its depth: orjson refuses
    more than 254 levels, and the standard library and repr() recurse (a
    RecursionError near 1,000), so nesting deeper than orjson takes is
    encoded here with a stack of its own."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS if sort_keys else 0).decode()
    except (TypeError, orjson.JSONEncodeError):
        pass
    out: list[str] = []
    stack: list = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, _Raw):
            out.append(v)
        elif isinstance(v, dict):
            items = list(v.items())
            if sort_keys:
                items.sort(key=lambda kv: str(kv[0]))
            stack.append(_Raw("}"))
            for i in range(len(items) - 1, -1, -1):
                k, x = items[i]
                stack.append(x)
                stack.append(_Raw(orjson.dumps(str(k)).decode() + ":"))
                if i:
                    stack.append(_Raw(","))
            out.append("{")
        elif isinstance(v, (list, tuple)):
            stack.append(_Raw("]"))
            for i in range(len(v) - 1, -1, -1):
                stack.append(v[i])
                if i:
                    stack.append(_Raw(","))
            out.append("[")
        else:
            try:
                out.append(orjson.dumps(v).decode())
            except (TypeError, orjson.JSONEncodeError):
                out.append(orjson.dumps(str(v)).decode())
    return "".join(out)


def json_text(value) -> str:
    """A decoded JSON value back as JSON text (for the projection to take its
    values from), at any depth; never raises."""
    if value is None:
        return ""
    return json_dumps(value)


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
    from it, and an unknown size (0). A path that holds a secret (a webhook
    URL, a token in a query string) keeps its whole text as the name, so that
    the redactor sees the secret in its context; its base name alone would be
    a bare random word."""
    name = posixpath.basename(path.replace("\\", "/")) or path
    if find_secret(path) is not None:
        name = path
    mime = mimetypes.guess_type(name)[0] or "application/octet-stream"
    return make(None, fallback_id, name, mime, 0)
