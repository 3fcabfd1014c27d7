"""Typed values shared by every part: the canonical log lines (§2.1) and the
internal Session/Message model that every source kind maps to."""

from __future__ import annotations

from typing import Any, Literal, TypeGuard

from pydantic import BaseModel, ConfigDict, Field

Role = Literal["user", "assistant", "tool_call", "tool_result", "system"]
ROLES: tuple[str, ...] = ("user", "assistant", "tool_call", "tool_result", "system")
# The roles whose text is indexed (indexer/project.py); system text is not.
SEARCHABLE_ROLES: tuple[str, ...] = ("user", "assistant", "tool_call", "tool_result")


def is_role(value: str) -> TypeGuard[Role]:
    """`value` names a Role."""
    return value in ROLES


class Attachment(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: str = Field(pattern=r"^[A-Za-z0-9_-]{1,128}$")
    name: str
    mime_type: str = "application/octet-stream"
    bytes: int = Field(ge=0, le=2**63 - 1)  # a size SQLite and JSON can carry


# --- the canonical log format, version 1 -------------------------------------


class _Line(BaseModel):
    model_config = ConfigDict(extra="ignore")


class SessionLine(_Line):
    type: Literal["session"]
    session_id: str = Field(min_length=1)
    cwd: str = Field(min_length=1)
    started_at: str
    title: str | None = None


class TitleLine(_Line):
    type: Literal["title"]
    session_id: str = Field(min_length=1)
    title: str


class MessageLine(_Line):
    type: Literal["message", "message_delta"]
    session_id: str = Field(min_length=1)
    message_id: str = Field(min_length=1)
    turn_id: str = ""
    role: Role
    ts: str
    text: str = ""
    tool_name: str | None = None
    # Kept raw and validated one by one at ingest (canonical.attachments): a
    # malformed attachment, or a malformed list of them, is skipped, not fatal.
    attachments: Any = None


# --- what every source kind yields -------------------------------------------


class SessionEvent(BaseModel):
    """Opens (or updates) a session; `title` None leaves the title alone."""

    session_id: str
    cwd: str
    started_at: str
    title: str | None = None
    title_rank: int = 0  # as TitleEvent.rank


class TitleEvent(BaseModel):
    """Titles a session, unless the title it has came with a higher rank (a
    user's custom title outranks a title made up for the session, whichever
    log says it last). Among equal ranks the last one wins."""

    session_id: str
    cwd: str
    title: str
    rank: int = 0


class LeafTitleEvent(BaseModel):
    """Titles whichever session of this source holds the message `leaf`, in
    any log, read before or after (a Claude Code `summary`: resumed logs
    carry summaries of other sessions). Until that message is indexed the
    title waits; it never titles anything else."""

    leaf: str
    title: str
    rank: int = 0


class MessageEvent(BaseModel):
    """A settled message (replaces any earlier text) or a delta (appends)."""

    session_id: str
    cwd: str
    message_id: str
    turn_id: str
    role: Role
    ts: str
    text: str
    attachments: list[Attachment] = Field(default_factory=list)
    settled: bool = True
    # A settled message that replaces an earlier settled copy of itself from
    # the same log (a harness that writes a record again, whole, when it
    # changes: Gemini CLI). Without it the first settled text stands.
    replaces: bool = False
    # What a person typed to start work (not injected context, not a
    # sub-agent's prompt): the first such message of an untitled session
    # names it (sessions.prompt).
    prompt: bool = False
    # Filled where the line was parsed (indexer.pipeline.prepare): the
    # redacted text and its index body, so that the writer only writes.
    prepared: Any = Field(default=None, exclude=True, repr=False)


class ForgetEvent(BaseModel):
    """Messages a log took back (a rewind): each id in `message_ids`, and
    every message whose id begins with that id and `#` (the other blocks of
    the same record), leave the index, if this log wrote them."""

    session_id: str
    cwd: str
    message_ids: list[str]


class KeepEvent(BaseModel):
    """Of the messages this log wrote into the session, exactly these remain
    (a database whose rows were deleted: an OpenCode revert)."""

    session_id: str
    cwd: str
    message_ids: list[str]


Event = SessionEvent | TitleEvent | LeafTitleEvent | MessageEvent | ForgetEvent | KeepEvent


# --- the envelope (contract §8) ------------------------------------------------


def _untitled(schema: dict[str, Any]) -> None:
    """Leave pydantic's generated property titles out of the published
    schema: they repeat the field names, and a tool's output schema is read by
    every client at every start (the MCP server publishes this one)."""
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)


class _Out(BaseModel):
    model_config = ConfigDict(json_schema_extra=_untitled)


Status = Literal["ok", "partial", "no_match", "empty_query", "empty_index", "refused", "denied",
                 "unknown_session", "unknown_anchor", "stale_cursor", "bad_argument"]
Engine = Literal["fts", "cjk-fallback", "session-scan", "none"]
MaterialKind = Literal["image", "text", "pdf", "binary"]


class Material(_Out):
    """An attachment of a passage message, as metadata. `resource` is present
    only where the caller may open it (its own session, a readable kind)."""

    name: str
    kind: MaterialKind
    mime_type: str
    bytes: int
    resource: str | None = None


class PassageMessage(_Out):
    message_id: str
    role: str
    ts: str | None
    text: str
    is_anchor: bool = False
    is_hit: bool = Field(default=False, description="this message matched the query (several hits in one turn collapse)")
    truncated: bool = False
    materials: list[Material] = Field(default_factory=list)


class Passage(_Out):
    anchor_id: str = Field(description="opaque; pass to recall_more to widen this passage")
    turn_id: str
    messages: list[PassageMessage]


class Result(_Out):
    session_id: str
    source: str
    title: str | None
    cwd: str
    started_at: str | None
    score: float
    partial: bool = Field(default=False, description="matches only some of the query's terms (see hint)")
    matched_terms: list[str]
    passage: Passage


class Diagnostics(_Out):
    engine: Engine
    elapsed_ms: float
    sessions_scanned: int = 0
    scan_budget: int = 0
    candidates: int = 0
    # A frequent query's bounded plan (docs/recall.md): the candidates ranked
    # for its first page, of at most how many; both null when every candidate was.
    ranked: int | None = None
    ranked_of: int | None = None
    ranked_of_more: bool = Field(default=False, description=(
        "ranked_of is where counting stopped: each word of the query is in more messages than that"))
    terms: list[str] = Field(default_factory=list)
    reranked: list[str] = Field(default_factory=list)
    index_freshness: dict[str, str | int | None] = Field(default_factory=dict)


class Envelope(_Out):
    """What every recall returns: results or a hint that says what to do next."""

    query: str
    question: str | None = None
    status: Status
    # The top of the git work tree holding the cwd, else the cwd (in `/` or
    # $HOME: only the sessions started there); None when all projects were
    # searched, or nothing was (refused, empty query, denied). docs/recall.md.
    project_root: str | None = Field(default=None, description="the project searched; null: all projects")
    results: list[Result] = Field(default_factory=list)
    next_cursor: str | None = None
    hint: str
    gaps: dict[str, str] = Field(default_factory=dict)
    diagnostics: Diagnostics
    redacted: int = 0
