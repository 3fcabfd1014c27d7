"""The MCP server (contract §9): `recall mcp` serves the tools `recall` and
`recall_more` over stdio, written with the `mcp` SDK v2 (`MCPServer`).

- Both tools return the envelope (contract §8) as structured output; the tools'
  output schema is the envelope's JSON Schema, and the text content carries the
  same envelope as compact JSON for clients that read only text.
- Index work is blocking (apsw), so it runs in a worker thread; one lock keeps
  the index (its read connection, and its write path on first use) used by
  one thread at a time.
- The `confirm` policy for `all_projects` asks the user through MCP
  elicitation and fails closed: no elicitation capability, decline, cancel,
  an error, or no answer within the timeout all mean no (docs/recall.md).
- The caller's own session (materials get a `resource` only there) comes from
  the request's `_meta["session-recall/caller_session"]`, else the environment
  variable `RECALL_CALLER_SESSION`, else `CLAUDE_CODE_SESSION_ID` (which Claude
  Code sets for the stdio MCP servers it starts). It is never a tool argument:
  the model must not be able to claim another session.

No `from __future__ import annotations` here: the SDK reads the tools'
annotations at registration, and the resolvers they name are closures.
"""

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

import anyio
import anyio.to_thread
from mcp.server.mcpserver import (
    AcceptedElicitation,
    Context,
    DeclinedElicitation,
    Elicit,
    ElicitationResult,
    MCPServer,
    Resolve,
)
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from mcp.types.version import is_version_at_least
from pydantic import BaseModel, Field

from . import Index, __version__
from .model import Envelope

CALLER_META_KEY = "session-recall/caller_session"
CALLER_ENV_VARS = ("RECALL_CALLER_SESSION", "CLAUDE_CODE_SESSION_ID")
# Below the 60 s a harness commonly allows one tool call, so that the envelope
# saying "nobody answered" reaches the agent instead of a timeout.
DEFAULT_CONFIRM_TIMEOUT_S = 50.0
# From this protocol revision on, a server cannot send requests mid-call: a
# question is returned from the call and the client retries with the answer.
_INPUT_REQUIRED_VERSION = "2026-07-28"
_SHOWN_QUERY_CHARS = 200

INSTRUCTIONS = """\
session-recall searches the user's past agent sessions (Claude Code, Codex and \
other harness transcripts on this machine) for what was said: decisions, fixes, \
file names, commands, errors. Call `recall` to find passages; call \
`recall_more` with a passage's `anchor_id` to read the whole turn around it. \
Every answer is an envelope whose `hint` says what to do next."""

RECALL_DESCRIPTION = """\
Search past agent sessions (this machine's Claude Code, Codex and other \
transcripts) for messages, and return the best passages: each matching message \
with its neighbours in the same turn, best first.

When to use: to recall what was said or decided before ("which font did we \
pick", "the bug we fixed last week", "上周修的那个 bug"), a command, a file, an \
error message. Use `recall` to find; then `recall_more(anchor)` with a \
passage's `anchor_id` to read the whole turn around a passage you found.

Query syntax (`query`): terms separated by spaces, and ALL terms must occur in \
one message (AND). Matching is exact and case-insensitive: Latin words and \
numbers match whole words only (no stemming, no prefixes: `font` does not \
match `fonts`); Chinese, Japanese and Korean match as substrings anywhere, \
without spaces (`字体` matches `中文字体选择`); "double quotes" make a phrase \
(`"source serif"`). There are no operators: OR, NOT, *, NEAR, parentheses are \
plain text. Two or three distinctive terms work best. A natural-language \
`question` ranks by its keywords (alone, any keyword may match; with a query, \
the query filters and the keywords rank).

Scope: by default only sessions of the current project (sessions started in \
the project of `cwd` or below it: the top of its git work tree, else `cwd` \
itself; `cwd` defaults to the directory this server runs in). \
`all_projects: true` searches every project, subject to the user's policy (it \
may be denied or need the user's confirmation). A `cwd` of `/`, the home \
folder or a folder above this project counts as all projects, under the same \
policy.

The result (structured content) is an envelope:
- `status`: ok, partial, no_match, empty_query, empty_index, refused, denied, \
unknown_session, stale_cursor.
- `hint`: what happened and what to do next; follow it.
- `results[]`: `session_id`, `title`, `cwd`, `started_at`, `score`, \
`matched_terms`, `partial`, and `passage` (`anchor_id`, `messages` with role, \
text, `is_anchor`, `is_hit`, `truncated`, `materials`).
- `partial: true` (status `partial`): no message has every term; these are the \
best messages with some of them (`matched_terms` says which). Try fewer or \
other terms.
- `gaps`: what was NOT searched or NOT shown (a scan budget reached, results \
left for the next page, an index still being built, a scope not allowed). \
An empty result with gaps is not proof that nothing was said.
- `next_cursor`: more results exist; call again with the same arguments and \
`cursor` set to it.
- status `refused`: the query looks like a secret (API key, token, password). \
Secrets are never indexed; search for the words around it instead.
- status `denied`: searching all projects was not allowed; search the current \
project, or pass the `cwd` of the project you mean.
- status `empty_index`: nothing is indexed yet, so nothing was searched.
Secrets inside passages appear as [redacted:kind] or #hash."""

RECALL_MORE_DESCRIPTION = """\
Widen one passage from `recall` to its whole turn: the messages before and \
after it in the same exchange (up to 40 on each side, with longer texts). Use it \
when a passage is cut (`truncated: true`) or you need the surrounding context \
(the question that led to an answer, the result of a command). Pass `anchor` \
exactly as the passage's `anchor_id`.

Returns the same envelope with one result. Status `unknown_anchor` means this \
is not an anchor, or its session is outside the scope: pass the same \
`all_projects` and `cwd` as the `recall` that returned it. Status `denied`: \
searching all projects was not allowed."""

# --- parameters, described for a model ------------------------------------------

Query = Annotated[str, Field(description=(
    "Terms that must ALL occur in one message (AND), matched exactly: Latin words whole and "
    "case-insensitive, Chinese/Japanese/Korean as substrings, \"double quotes\" for a phrase. "
    "No operators. May be empty when `question` is given. Examples: `简历 字体`, "
    "`\"source serif\" font`, `checkout rounding`."))]
Question = Annotated[str | None, Field(description=(
    "A question in natural language (any language). Its keywords rank the results; "
    "alone, messages with any of its keywords are found, most keywords first."))]
AllProjects = Annotated[bool, Field(description=(
    "Search the sessions of every project on this machine instead of only the current one. "
    "Subject to the user's policy: it may be denied, or the user may be asked to confirm "
    "(status `denied` when not allowed)."))]
Cwd = Annotated[str | None, Field(description=(
    "The project directory whose sessions to search (sessions started in its project, the top of its "
    "git work tree, or below it), as an absolute path. Default: the directory this server runs in, "
    "normally the current project. `/`, the home folder or a folder above the project count as all "
    "projects (subject to the user's policy)."))]
SessionId = Annotated[str | None, Field(description=(
    "Only this session: a `session_id` from an earlier result."))]
Limit = Annotated[int | None, Field(description=(
    "Passages per page (default 5; capped by the user's configuration, normally at 50)."))]
Cursor = Annotated[str | None, Field(description=(
    "The `next_cursor` of an earlier result, for its next page; pass the same query, question, "
    "scope and limit with it."))]
Anchor = Annotated[str, Field(description=(
    "A passage's `anchor_id` from a `recall` result, copied exactly (opaque)."))]
MoreAllProjects = Annotated[bool, Field(description=(
    "Set to true when the passage came from a recall with `all_projects: true` "
    "(same policy and confirmation as there)."))]
MoreCwd = Annotated[str | None, Field(description=(
    "The `cwd` of the recall that returned the anchor, if you passed one."))]


class AllProjectsConsent(BaseModel):
    """The form the user sees when the `confirm` policy asks."""

    allow: bool = Field(default=False, title="Search all projects",
                        description="Let this search read past sessions from every project on this machine")


@dataclass(frozen=True)
class Decision:
    """The answer to `all_projects` under the confirm policy. `allowed` None:
    nobody was asked (not needed). `why` says why the answer is no."""

    allowed: bool | None
    why: str = ""


NOT_ASKED = Decision(None)


def caller_session_from_env(environ: dict[str, str] | None = None) -> str | None:
    environ = os.environ if environ is None else environ
    for name in CALLER_ENV_VARS:
        value = (environ.get(name) or "").strip()
        if value:
            return value
    return None


def _blank_to_none(value: str | None) -> str | None:
    return value if value is None or value.strip() else None


def _result(env: Envelope) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=env.model_dump_json())],
                          structured_content=env.model_dump(mode="json"))


def _can_elicit(ctx: Context) -> bool:
    """The client declared form elicitation (a bare `elicitation: {}` counts as form)."""
    try:
        caps = ctx.client_capabilities
    except Exception:
        return False
    elicitation = caps.elicitation if caps is not None else None
    return elicitation is not None and (elicitation.form is not None or elicitation.url is None)


def _input_required_era(ctx: Context) -> bool:
    version = ctx.protocol_version
    return bool(version) and is_version_at_least(version, _INPUT_REQUIRED_VERSION)


def _decision(outcome: Any) -> Decision:
    """The resolver's outcome as a Decision; anything but a yes is a no."""
    if isinstance(outcome, AcceptedElicitation):
        data = outcome.data
        if isinstance(data, Decision):
            return data
        if isinstance(data, AllProjectsConsent):
            return Decision(True) if data.allow is True else Decision(False, "the user answered no")
        return Decision(False, "the confirmation returned no usable answer")
    if isinstance(outcome, DeclinedElicitation):
        return Decision(False, "the user declined")
    return Decision(False, "the user dismissed the question without answering")


class RecallServer:
    """One open Index behind the tools, used by one worker thread at a time."""

    def __init__(self, index: Index, *, cwd: str | None = None, caller_session: str | None = None,
                 confirm_timeout: float = DEFAULT_CONFIRM_TIMEOUT_S):
        self.index = index
        self.cwd = cwd or os.getcwd()
        self.caller_session = caller_session
        self.confirm_timeout = confirm_timeout
        self._lock = threading.Lock()

    # --- plumbing -------------------------------------------------------------------

    async def _run(self, fn: Callable[..., Envelope], *args: Any, **kwargs: Any) -> Envelope:
        def call() -> Envelope:
            with self._lock:
                return fn(*args, **kwargs)

        return await anyio.to_thread.run_sync(call)

    def _caller(self, ctx: Context) -> str | None:
        """The calling session: the request's `_meta`, else the server's environment."""
        try:
            meta = ctx.request_context.meta or {}
        except Exception:
            meta = {}
        value = meta.get(CALLER_META_KEY) if isinstance(meta, dict) else None
        if isinstance(value, str) and value.strip():
            return value.strip()
        return self.caller_session

    async def ask_all_projects(self, ctx: Context, all_projects: bool, cwd: str | None,
                               what: str | None) -> Decision | Elicit[AllProjectsConsent]:
        """Under the confirm policy, ask the user before an all-projects search.
        `what` None: the call would search nothing (refused, empty), so no one is asked."""
        if self.index.settings.all_projects != "confirm" or what is None:
            return NOT_ASKED
        # A cwd at `/`, `$HOME` or above this project is an all-projects search too (gates).
        wide = None if all_projects else Index.wide_scope(cwd or self.cwd, self.cwd)
        if not all_projects and wide is None:
            return NOT_ASKED
        if not _can_elicit(ctx):
            return Decision(False, "this MCP client cannot ask the user (it declared no elicitation support)")
        if wide is None:
            message = (f"session-recall: allow this search to read past sessions of ALL projects on this machine, "
                       f"not only {cwd or self.cwd}? {what}")
        else:
            message = (f"session-recall: allow this search to read past sessions of every project under "
                       f"{cwd} ({wide}), not only this project's ({self.cwd})? {what}")
        if _input_required_era(ctx):
            # The question is returned from the call; the client retries with the answer.
            return Elicit(message, AllProjectsConsent)
        try:
            with anyio.fail_after(self.confirm_timeout):
                return _decision(await ctx.elicit(message, AllProjectsConsent))
        except TimeoutError:
            return Decision(False, f"the user did not answer within {self.confirm_timeout:g}s")
        except Exception:
            return Decision(False, "the client could not ask the user (the confirmation request failed)")

    @staticmethod
    def _confirm(decision: Decision) -> Callable[[str], bool] | None:
        if decision.allowed is None:
            return None  # not asked: should the engine ask anyway, no callback means no
        return lambda _question: decision.allowed is True

    @staticmethod
    def _explain(env: Envelope, decision: Decision) -> Envelope:
        if env.status == "denied" and decision.why:
            env.gaps["all_projects"] = f"all projects were not searched: {decision.why}"
        return env

    # --- the tools ----------------------------------------------------------------

    async def recall(self, ctx: Context, query: str, question: str | None, all_projects: bool, cwd: str | None,
                     session_id: str | None, limit: int | None, cursor: str | None, consent: Any) -> Envelope:
        decision = _decision(consent)
        env = await self._run(self.index.recall, query or "", _blank_to_none(question), all_projects,
                              _blank_to_none(cwd) or self.cwd, _blank_to_none(session_id), limit,
                              _blank_to_none(cursor), caller_session=self._caller(ctx),
                              confirm=self._confirm(decision), caller_cwd=self.cwd)
        return self._explain(env, decision)

    async def recall_more(self, ctx: Context, anchor: str, all_projects: bool, cwd: str | None,
                          consent: Any) -> Envelope:
        decision = _decision(consent)
        env = await self._run(self.index.recall_more, anchor, cwd=_blank_to_none(cwd) or self.cwd,
                              all_projects=all_projects, caller_session=self._caller(ctx),
                              confirm=self._confirm(decision), caller_cwd=self.cwd)
        return self._explain(env, decision)


def _shown(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _SHOWN_QUERY_CHARS else text[:_SHOWN_QUERY_CHARS] + "…"


def build_server(index: Index, *, cwd: str | None = None, caller_session: str | None = None,
                 confirm_timeout: float = DEFAULT_CONFIRM_TIMEOUT_S) -> MCPServer:
    """An MCPServer with the tools `recall` and `recall_more` over `index`."""
    rs = RecallServer(index, cwd=cwd, caller_session=caller_session, confirm_timeout=confirm_timeout)
    server = MCPServer("session-recall", title="session-recall", version=__version__,
                       instructions=INSTRUCTIONS, log_level="WARNING")
    read_only = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                                open_world_hint=False)

    # Resolvers run before the tool body and decide the confirm policy's answer;
    # they take the tool's own arguments by name. They never appear in the input schema.
    async def recall_consent(query: str, question: str | None, all_projects: bool, cwd: str | None,
                             ctx: Context) -> Decision | Elicit[AllProjectsConsent]:
        texts = [query or "", question or ""]
        if any(Index.secret_in(t) for t in texts) or not any(t.strip() for t in texts):
            what = None  # refused or empty: nothing would be searched
        else:
            what = "The agent searches for: " + _shown(" / ".join(t for t in texts if t.strip()))
        return await rs.ask_all_projects(ctx, all_projects, _blank_to_none(cwd), what)

    async def more_consent(anchor: str, all_projects: bool, cwd: str | None,
                           ctx: Context) -> Decision | Elicit[AllProjectsConsent]:
        what = "The agent wants to read one passage in full." if Index.is_anchor(anchor) else None
        return await rs.ask_all_projects(ctx, all_projects, _blank_to_none(cwd), what)

    @server.tool(name="recall", title="Recall past sessions", description=RECALL_DESCRIPTION,
                 annotations=read_only)
    async def recall(query: Query = "", question: Question = None, all_projects: AllProjects = False,
                     cwd: Cwd = None, session_id: SessionId = None, limit: Limit = None, cursor: Cursor = None,
                     *, ctx: Context,
                     consent: Annotated[ElicitationResult[AllProjectsConsent], Resolve(recall_consent)],
                     ) -> Annotated[CallToolResult, Envelope]:
        return _result(await rs.recall(ctx, query, question, all_projects, cwd, session_id, limit, cursor, consent))

    @server.tool(name="recall_more", title="Read a whole turn", description=RECALL_MORE_DESCRIPTION,
                 annotations=read_only)
    async def recall_more(anchor: Anchor, all_projects: MoreAllProjects = False, cwd: MoreCwd = None,
                          *, ctx: Context,
                          consent: Annotated[ElicitationResult[AllProjectsConsent], Resolve(more_consent)],
                          ) -> Annotated[CallToolResult, Envelope]:
        return _result(await rs.recall_more(ctx, anchor, all_projects, cwd, consent))

    return server


def serve(index: Index, *, confirm_timeout: float = DEFAULT_CONFIRM_TIMEOUT_S) -> None:
    """Serve over stdio until the client closes the connection. The default cwd
    is this process's directory (harnesses start MCP servers in the project)."""
    build_server(index, cwd=os.getcwd(), caller_session=caller_session_from_env(),
                 confirm_timeout=confirm_timeout).run("stdio")
