"""What is searchable of each message, by role (contract §2.2).

The projection has a version, recorded in the index with the tokenizer's and
the redactor's (Store.versions): a change rebuilds the index (Syncer.rebuild).
"""

from __future__ import annotations

import re

import orjson

from ..text.fold import PLACEHOLDER_CLOSE, PLACEHOLDER_OPEN
from ..text.redact import is_secret_key

# 2: terminal escape sequences are dropped from every projected text.
# 3: titles: a Claude Code summary titles the session of its `leafUuid`; Codex
#    names from session_index.jsonl; the first prompt names an untitled session.
# 4: the first prompt also names an untitled Gemini CLI or Pi session.
# 5: a Claude Code summary titles only a leaf in its own project folder (an
#    index built before may hold a title written in another project's log).
PROJECTION_VERSION = 5

# ECMA-48 escape sequences, which tools print to colour, move the cursor or
# title the terminal window: not text. In order: a control sequence (CSI:
# `ESC [` or U+009B, parameter and intermediate bytes, a final byte, which a
# cut-off sequence lacks); a control string (OSC `ESC ]`, DCS `ESC P`, SOS
# `ESC X`, PM `ESC ^`, APC `ESC _`, or their one-character forms) up to its
# terminator (BEL, `ESC \` or U+009C), or to the end of its line when it has
# none; an nF sequence (`ESC ( B`); any other escape (`ESC 7`, `ESC =`, `ESC c`),
# or a lone ESC.
_ESCAPE = re.compile(
    r"(?:\x1b\[|\x9b)[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]?"
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c\n]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b[\x20-\x2f]+[\x30-\x7e]?"
    r"|\x1b[\x30-\x7e]?"
)
_C1_START = re.compile(r"[\x90\x98\x9b\x9d\x9e\x9f]")


def strip_escapes(text: str) -> str:
    """`text` without its terminal escape sequences: `\\x1b[31mFAILED\\x1b[0m`
    is `FAILED`. Text without any is returned as it is."""
    if "\x1b" not in text and (text.isascii() or _C1_START.search(text) is None):
        return text
    return _ESCAPE.sub("", text)


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


# Keys whose value is a credential in an HTTP header's syntax (`Basic ...`,
# `sessionid=...`): kept beside the value so that the redactor reads it as
# the header it is (a tool call's `headers`, an HTTP client's output).
_HEADER_KEYS = frozenset({"authorization", "proxy-authorization", "cookie", "set-cookie"})
# A secret named by a sibling: `{"name": "DB_PASSWORD", "value": "..."}`
# (Kubernetes and ECS env lists), `{"id": "password", "value": "..."}`
# (1Password's items), `{"name": "Authorization", "value": "Basic ..."}`
# (a HAR file's, Postman's and the browsers' header lists); a `keyName`
# sibling names a key (Azure's storage account keys).
_NAME_KEYS = ("name", "Name", "key", "Key", "id", "label")
_VALUE_KEYS = frozenset({"value", "Value"})


def _keyed_value(key: str) -> bool:
    """A string under this key keeps its key beside it in the text: a key
    naming a secret (redacted whatever its shape), a header that carries a
    credential, or any other `..._key` (`dd_app_key`, `caKey`), whose value
    the redactor takes when it looks random."""
    return is_secret_key(key) or key[-3:].lower() == "key" or key.lower() in _HEADER_KEYS


def _dict_leaves(value: dict) -> list:
    """A JSON object's values, in order, each string under a secret-naming
    key written with its key (_keyed). A secret may be named by a sibling
    (`{"name": "DB_PASSWORD", "value": ...}`) or by the key above an object
    that holds it (Terraform's `{"db_password": {"sensitive": true, "value":
    ...}}`)."""
    named = next((n for k in _NAME_KEYS if isinstance(n := value.get(k), str)
                  and (is_secret_key(n) or n.lower() in _HEADER_KEYS)), None)
    if named is None and isinstance(value.get("keyName"), str):
        named = "key"  # (`az storage account keys list`: `{"keyName": "key1", "value": ...}`, taken when it looks random)
    out: list = []
    for k, v in value.items():
        if isinstance(v, str):
            if named is not None and k in _VALUE_KEYS:
                out.append(_keyed(named, v))
            else:
                out.append(_keyed(k, v) if _keyed_value(k) else v)
        elif isinstance(v, dict) and is_secret_key(k):
            out.append({kk: _keyed(k, vv) if kk in _VALUE_KEYS and isinstance(vv, str) else vv
                        for kk, vv in v.items()})
        else:
            out.append(v)
    return out


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
            stack.extend(reversed(_dict_leaves(value)))
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
    """The searchable text of one message, or None when the role is not
    indexed. Terminal escape sequences are dropped in every role: tool output
    is full of them, and Claude Code records the output of a `!` command as
    user text."""
    if role in ("user", "assistant"):
        return strip_escapes(text)
    if role == "tool_call":
        args = visible_text(text)
        return strip_escapes(f"{tool_name}\n{args}" if tool_name else args)
    if role == "tool_result":
        return strip_escapes(visible_text(text))
    return None  # system text is not indexed by default


# What harnesses put in the user's place that the user did not type: Codex's
# environment and instructions (AGENTS.md bodies, permissions), Claude Code's
# slash-command records, local command output, hook and system reminders,
# the note a resumed conversation starts with. Never a session's first prompt.
_INJECTED = (
    "<environment_context>", "<user_instructions>", "<INSTRUCTIONS>", "# AGENTS.md instructions",
    "<permissions instructions>", "<user_shell_command>", "<turn_aborted>", "<subagent_notification>",
    "<command-name>", "<command-message>", "<command-args>", "<local-command-", "<bash-input>",
    "<bash-stdout>", "<bash-stderr>", "<system-reminder>", "<user-prompt-submit-hook>",
    "Caveat: The messages below were generated by the user while running local commands",
    "This session is being continued from a previous conversation", "[Request interrupted by user",
)
PROMPT_TITLE_CHARS = 80
_SPACES = re.compile(r"\s+")


def is_prompt(text: str) -> bool:
    """Whether user text is something a person typed (not text a harness
    injected in the user's place)."""
    head = text.lstrip()
    return bool(head) and not head.startswith(_INJECTED)


def prompt_title(text: str) -> str:
    """A prompt, as the title of a session that has none: its white space
    collapsed, cut at a word end to at most PROMPT_TITLE_CHARS characters
    (with `…`), never inside a redaction placeholder."""
    flat = _SPACES.sub(" ", text).strip()
    if len(flat) <= PROMPT_TITLE_CHARS:
        return flat
    cut = flat[: PROMPT_TITLE_CHARS - 1]
    space = cut.rfind(" ")
    if space >= PROMPT_TITLE_CHARS // 2:
        cut = cut[:space]
    if cut.count(PLACEHOLDER_OPEN) > cut.count(PLACEHOLDER_CLOSE):
        cut = cut[: cut.rfind(PLACEHOLDER_OPEN)]
    return cut.rstrip() + "…"
