"""What is searchable of each message, by role (contract §2.2)."""

from __future__ import annotations

import re

import orjson

from ..text.redact import is_secret_key

# A JSON string literal, and whether a colon follows it (an object's key).
_STRING = re.compile(rb'"((?:[^"\\]|\\.)*)"(\s*:)?', re.DOTALL)


def _deep_strings(text: str) -> list[str]:
    """The string values of JSON text nested deeper than orjson decodes (1,024
    levels), in document order, found by a scan of its string literals (keys
    left out), never by recursion. Numbers are not kept."""
    out: list[str] = []
    for m in _STRING.finditer(text.encode("utf-8", "surrogatepass")):
        if m.group(2):
            continue
        try:
            value = orjson.loads(b'"' + m.group(1) + b'"')
        except orjson.JSONDecodeError:
            continue
        if value:
            out.append(value)
    return out



def _keyed(key: str, value: str) -> str:
    """A string under a secret-naming key (`password`, `api_key`, `auth`...),
    written as `"key": "value"` so that the redactor takes the value whatever
    its shape (its own quotes become `'`, its line breaks JSON escapes, so that
    a private key's lines stay lines)."""
    v = value.replace('"', "'").replace("\r", "\\r").replace("\n", "\\n")
    return f'"{key}": "{v}"'


def _keyed_value(key: str) -> bool:
    """A string under this key keeps its key beside it in the text: a key
    naming a secret (redacted whatever its shape), or any other `..._key`
    (`dd_app_key`, `caKey`), whose value the redactor takes when it looks
    random."""
    return is_secret_key(key) or key[-3:].lower() == "key"


def _leaves(value, out: list[str]) -> None:
    """The string and number leaves of a decoded JSON value, in document order.
    Iterative: a tool result nested a thousand levels deep must not exhaust
    the interpreter's recursion limit."""
    stack = [value]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            if value:
                out.append(value)
        elif isinstance(value, dict):
            stack.extend(reversed([_keyed(k, v) if isinstance(v, str) and _keyed_value(k) else v
                                   for k, v in value.items()]))
        elif isinstance(value, list):
            stack.extend(reversed(value))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            out.append(str(value))


def visible_text(text: str) -> str:
    """The text content of a JSON envelope (string leaves, one a line), or the
    text itself when it is not JSON; escaping and punctuation never reach the
    index or a passage."""
    head = text.lstrip()[:1]
    if head not in ("{", "["):
        return text
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as e:
        if str(e).startswith("depth limit"):
            return "\n".join(_deep_strings(text))
        return text
    out: list[str] = []
    _leaves(value, out)
    return "\n".join(out)


def project(role: str, text: str, tool_name: str | None = None) -> str | None:
    """The searchable text of one message, or None when the role is not indexed."""
    if role in ("user", "assistant"):
        return text
    if role == "tool_call":
        args = visible_text(text)
        return f"{tool_name}\n{args}" if tool_name else args
    if role == "tool_result":
        return visible_text(text)
    return None  # system text is not indexed by default
