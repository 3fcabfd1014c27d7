"""The MCP server (contract §9): `recall mcp` serves the tools `recall` and
`recall_more` over stdio, written with the `mcp` SDK v2 (`MCPServer`).

- Both tools return the envelope (contract §8) as structured content (fields
  at their defaults left out); `recall` publishes its JSON Schema as output
  schema. Claude Code and Codex hand a model the structured content as JSON;
  clients that read only text get `render_text`, the same answer without the
  diagnostics. Either fits a model's budget: a default `recall` about 8,000
  characters (shorter passages, a page bounded in characters), any answer at
  most MAX_ANSWER_CHARS (README, "MCP").
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
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any

import anyio
import anyio.to_thread
import orjson
from mcp.server.mcpserver import (
    AcceptedElicitation,
    Context,
    DeclinedElicitation,
    Elicit,
    ElicitationResult,
    MCPServer,
    Resolve,
)
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.types import CallToolResult, InputRequiredResult, TextContent, ToolAnnotations
from mcp.types.version import is_version_at_least
from pydantic import AfterValidator, BaseModel, Field, ValidationError

from . import Index, __version__, paths
from .model import Diagnostics, Envelope

CALLER_META_KEY = "session-recall/caller_session"
CALLER_ENV_VARS = ("RECALL_CALLER_SESSION", "CLAUDE_CODE_SESSION_ID")
# Below the 60 s a harness commonly allows one tool call, so that the envelope
# saying "nobody answered" reaches the agent instead of a timeout.
DEFAULT_CONFIRM_TIMEOUT_S = 50.0
# From this protocol revision on, a server cannot send requests mid-call: a
# question is returned from the call and the client retries with the answer.
_INPUT_REQUIRED_VERSION = "2026-07-28"
_SHOWN_QUERY_CHARS = 200
# Codex cuts a longer tool result in its middle, silently; no answer is longer.
MAX_ANSWER_CHARS = 48_000
_ECHO_CHARS = 1000

INSTRUCTIONS = """\
session-recall searches the user's past agent sessions (Claude Code, Codex and \
other harness transcripts on this machine) for what was said: decisions, fixes, \
file names, commands, errors. Call `recall` to find passages; call \
`recall_more` with a passage's `anchor_id` to read the whole turn around it. \
Every answer has a `status` and a `hint` that says what to do next."""

# What a model needs to call the tool well; what each answer means is in its
# own `hint` and `gaps`, so it is not repeated here (tools/list is read into
# every conversation).
RECALL_DESCRIPTION = """\
Search past agent sessions on this machine for what was said before (a \
decision, a fix, a command, a file, an error; "which font did we pick", \
"上周修的那个 bug").
`query`: terms that must ALL occur in one message (AND), matched exactly and \
case-insensitively: Latin words whole (`font` does not match `fonts`), \
Chinese, Japanese and Korean as a substring anywhere; "double quotes" make a \
phrase; no operators (OR, NOT, * are plain text). Two or three distinctive \
terms work best. `question`: natural language whose keywords rank.
Scope: the current project unless `cwd` or `all_projects` (the user's policy \
may deny it or ask).
Answer: `status`, a `hint` (follow it), `results` (passages: a hit with its \
neighbours; `partial` ones lack some terms), `gaps` (what was not searched or \
shown: no result with gaps is no proof), `next_cursor` (more pages). Pass a \
passage's `anchor_id` to `recall_more` for its whole turn. Secrets show as \
[redacted:kind] or #hash."""

RECALL_MORE_DESCRIPTION = """\
Widen one passage from `recall` to its whole turn (the messages around it, \
longer texts). `anchor`: the passage's `anchor_id`, exactly. Pass the same \
`all_projects` and `cwd` as the `recall` that found it. Answers with the \
same envelope as `recall`, one result."""

# --- parameters, described for a model ------------------------------------------

Query = Annotated[str, Field(description=(
    "Terms ALL in one message, e.g. `简历 字体`, `\"source serif\" font`. May be empty with `question`."))]
Question = Annotated[str | None, Field(description=(
    "Natural language, any language; its keywords rank (alone: any keyword matches)."))]
AllProjects = Annotated[bool, Field(description=(
    "Search every project on this machine, not only the current one (the user's policy decides)."))]
def _absolute_cwd(cwd: str | None) -> str | None:
    """A `cwd` argument names a folder as an absolute path (`~` for the home
    folder may lead it); a relative one would be read against wherever the
    server was started, and a NUL names no folder, so either is a bad
    argument, not a quiet search of some other scope. Blank is no cwd."""
    if cwd is None or not cwd.strip():
        return cwd
    if any(ord(c) < 0x20 or c == "\x7f" for c in cwd):
        raise ValueError("holds a control character (a NUL, a newline, ...); pass the folder's path alone")
    if cwd != cwd.strip():
        raise ValueError("starts or ends with white space; pass the folder's path alone")
    if not os.path.isabs(os.path.expanduser(cwd)):
        if cwd.startswith("~"):
            raise ValueError("names no user's home folder; pass an absolute path (one that starts with `/`)")
        raise ValueError("must be an absolute path (one that starts with `/`, or `~` for the home folder)")
    return cwd


Cwd = Annotated[str | None, AfterValidator(_absolute_cwd), Field(description=(
    "Absolute path of the project to search (default: the current one). `/`, the home folder or a "
    "folder above the project mean all projects."))]
SessionId = Annotated[str | None, Field(description="Only this session (a `session_id` from a result).")]
Limit = Annotated[int | None, Field(description="Passages per page (default 5).")]
Cursor = Annotated[str | None, Field(description=(
    "A result's `next_cursor`, with the same other arguments, for the next page."))]
Anchor = Annotated[str, Field(description="A passage's `anchor_id` from `recall`, exactly.")]
MoreAllProjects = Annotated[bool, Field(description="As in the `recall` that found the passage.")]
MoreCwd = Annotated[str | None, AfterValidator(_absolute_cwd), Field(description="As in the `recall` that found the passage.")]


class AllProjectsConsent(BaseModel):
    """The form the user sees when the `confirm` policy asks."""

    allow: bool = Field(default=False, title="Search all projects",
                        description="Let this search read past sessions from every project on this machine")


@dataclass(frozen=True)
class Decision:
    """The answer to `all_projects` under the confirm policy. `allowed` None:
    nobody was asked (not needed). `why` says why the answer is no;
    `by_user` that the no is the user's own answer (declined, or answered
    no), not a question nobody could answer."""

    allowed: bool | None
    why: str = ""
    by_user: bool = False


NOT_ASKED = Decision(None)


def caller_session_from_env(environ: Mapping[str, str] | None = None) -> str | None:
    env: Mapping[str, str] = os.environ if environ is None else environ
    for name in CALLER_ENV_VARS:
        value = (env.get(name) or "").strip()
        if value:
            return value
    return None


def _blank_to_none(value: str | None) -> str | None:
    return value if value is None or value.strip() else None


def _fit(env: Envelope) -> dict[str, Any]:
    """The envelope as structured content: fields at their defaults left out,
    and never over MAX_ANSWER_CHARS of JSON. Passages are already bounded
    (the engine's budgets for a model); what else could grow with the input
    (the query and question echoed, the terms, a hint or gap quoting them) is
    cut to a fixed length."""
    data = env.model_dump(mode="json", exclude_defaults=True)
    if _size(data) <= MAX_ANSWER_CHARS:
        return data
    env = env.model_copy(deep=True)
    env.query = _clip(env.query, _ECHO_CHARS)
    env.question = None if env.question is None else _clip(env.question, _ECHO_CHARS)
    env.hint = _clip(env.hint, _ECHO_CHARS)
    env.gaps = {k: _clip(v, _ECHO_CHARS) for k, v in list(env.gaps.items())[:16]}
    env.diagnostics.terms = [_clip(t, 100) for t in env.diagnostics.terms[:32]]
    return env.model_dump(mode="json", exclude_defaults=True)


def _size(data: Any) -> int:
    return len(orjson.dumps(data).decode())


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[:n] + "…"


def render_text(env: Envelope) -> str:
    """The envelope as text for a client that shows a model only the text
    content: status, hint, gaps and passages; no diagnostics (they stay in the
    structured content)."""
    lines = [f"status: {env.status}", f"hint: {env.hint}"]
    if env.project_root:
        lines.append(f"project_root: {env.project_root}")
    lines += [f"gap {k}: {v}" for k, v in env.gaps.items()]
    if env.next_cursor:
        lines.append(f"next_cursor: {env.next_cursor}")
    for i, r in enumerate(env.results, 1):
        head = f"[{i}] {r.title or '(untitled)'} | session {r.session_id} | {r.source} | {r.cwd} | {r.started_at or ''}"
        if r.partial:
            head += " | partial, has: " + ", ".join(r.matched_terms)
        lines += ["", head, f"anchor_id: {r.passage.anchor_id}"]
        for m in r.passage.messages:
            mark = ">" if m.is_anchor else "*" if m.is_hit else "-"
            cut = " (cut)" if m.truncated else ""
            lines.append(f"{mark} {m.role} {m.ts or ''}{cut}: " + m.text.replace("\n", "\n    "))
            for mat in m.materials:
                lines.append(f"    [{mat.kind} {mat.name}, {mat.bytes} bytes" + (f", {mat.resource}]" if mat.resource else "]"))
    return "\n".join(lines)


def _result(env: Envelope) -> CallToolResult:
    data = _fit(env)
    fitted = Envelope.model_validate(data)
    return CallToolResult(content=[TextContent(type="text", text=render_text(fitted))], structured_content=data)


# What each tool's arguments take, for the hint of a call whose arguments do not fit.
_ARGUMENT_TYPES = {
    "recall": ("`query`, `question`, `session_id` and `cursor` strings, `cwd` an absolute path, "
               "`all_projects` true or false, `limit` a whole number"),
    "recall_more": ("`anchor` a string (a passage's `anchor_id`), `all_projects` true or false, "
                    "`cwd` an absolute path"),
}


def bad_argument(tool: str, arguments: dict[str, Any], error: ValidationError) -> Envelope:
    """The envelope of a call whose arguments do not fit the tool's input
    schema (a number for `query`, `limit` "abc", no `anchor`): status
    `bad_argument`, and a hint that names each argument and what it takes.
    The rejected values are not quoted back (they are the caller's data)."""
    problems = "; ".join(sorted({f"`{'.'.join(str(p) for p in e['loc'])}`: {e['msg'].removeprefix('Value error, ')}"
                                 for e in error.errors()}))
    echoed = arguments.get("anchor" if tool == "recall_more" else "query")
    return Envelope(query=echoed if isinstance(echoed, str) else "", status="bad_argument",
                    hint=f"Nothing was searched: {problems}. Call {tool} again with {_ARGUMENT_TYPES[tool]}.",
                    diagnostics=Diagnostics(engine="none", elapsed_ms=0.0))


class _Server(MCPServer):
    """The SDK's server, but a call to one of our tools whose arguments do not
    fit its input schema answers with the envelope (status `bad_argument`),
    as every other failure does, not with the validator's error text."""

    async def call_tool(self, name: str, arguments: dict[str, Any],
                        context: Context | None = None) -> CallToolResult | InputRequiredResult:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if (isinstance(exc, UnexpectedToolError) or not isinstance(cause, ValidationError)
                    or name not in _ARGUMENT_TYPES):
                raise
            return _result(bad_argument(name, arguments, cause))


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
    if not version:
        return False
    return is_version_at_least(version, _INPUT_REQUIRED_VERSION)


def _decision(outcome: Any) -> Decision:
    """The resolver's outcome as a Decision; anything but a yes is a no."""
    if isinstance(outcome, AcceptedElicitation):
        data = outcome.data
        if isinstance(data, Decision):
            return data
        if isinstance(data, AllProjectsConsent):
            return Decision(True) if data.allow is True else Decision(False, "the user answered no", by_user=True)
        return Decision(False, "the confirmation returned no usable answer")
    if isinstance(outcome, DeclinedElicitation):
        return Decision(False, "the user declined", by_user=True)
    return Decision(False, "the user dismissed the question without answering")


class RecallServer:
    """One open Index behind the tools, used by one worker thread at a time."""

    def __init__(self, index: Index, *, cwd: str | None = None, caller_session: str | None = None,
                 confirm_timeout: float = DEFAULT_CONFIRM_TIMEOUT_S):
        self.index = index
        self.cwd = cwd or paths.process_cwd()
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
        # No cwd given: the server's own directory, never wider than its project (gates).
        wide = None if all_projects or cwd is None else Index.wide_scope(cwd, self.cwd)
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
    def _confirm(decision: Decision) -> Callable[[str], bool | None] | None:
        if decision.allowed is None:
            return None  # not asked: should the engine ask anyway, no callback means no
        answer = True if decision.allowed is True else (False if decision.by_user else None)
        return lambda _question: answer

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
                              _blank_to_none(cwd), _blank_to_none(session_id), limit,
                              _blank_to_none(cursor), caller_session=self._caller(ctx),
                              confirm=self._confirm(decision), caller_cwd=self.cwd, for_model=True)
        return self._explain(env, decision)

    async def recall_more(self, ctx: Context, anchor: str, all_projects: bool, cwd: str | None,
                          consent: Any) -> Envelope:
        decision = _decision(consent)
        env = await self._run(self.index.recall_more, anchor, cwd=_blank_to_none(cwd),
                              all_projects=all_projects, caller_session=self._caller(ctx),
                              confirm=self._confirm(decision), caller_cwd=self.cwd)
        if (env.status == "unknown_anchor" and not all_projects and Index.is_anchor(anchor)
                and self.index.settings.all_projects != "deny"):
            # The model may have dropped the scope of the recall that found the
            # passage. Said of every unknown anchor alike (one out of scope and
            # one that does not exist read the same), so it probes nothing.
            env.hint += " If the recall that found it passed all_projects or a cwd, pass the same."
        return self._explain(env, decision)


def _shown(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _SHOWN_QUERY_CHARS else text[:_SHOWN_QUERY_CHARS] + "…"


def build_server(index: Index, *, cwd: str | None = None, caller_session: str | None = None,
                 confirm_timeout: float = DEFAULT_CONFIRM_TIMEOUT_S) -> MCPServer:
    """An MCPServer with the tools `recall` and `recall_more` over `index`."""
    rs = RecallServer(index, cwd=cwd, caller_session=caller_session, confirm_timeout=confirm_timeout)
    server = _Server("session-recall", title="session-recall", version=__version__,
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
                          ) -> CallToolResult:
        # The same envelope as `recall`; its output schema is published once,
        # on `recall`, to keep tools/list short.
        return _result(await rs.recall_more(ctx, anchor, all_projects, cwd, consent))

    return server


def serve(index: Index, *, confirm_timeout: float = DEFAULT_CONFIRM_TIMEOUT_S) -> None:
    """Serve over stdio until the client closes the connection. The default cwd
    is this process's directory (harnesses start MCP servers in the project)."""
    build_server(index, cwd=paths.process_cwd(), caller_session=caller_session_from_env(),
                 confirm_timeout=confirm_timeout).run("stdio")
