"""What a person reads on a terminal: text from session logs made safe to
print, and the colours the command line uses.

Logs hold whatever tools printed, terminal control sequences included (a
window title set with OSC 2, a clipboard written with OSC 52, a screen
cleared with CSI 2J). Printed as they are, they would act on the reader's
terminal. Human output therefore shows every control character as a visible
escape, as `cat -v` and `less` do: C0 controls in caret notation (`ESC` is
`^[`, `BEL` is `^G`), DEL as `^?`, C1 controls as `<U+009B>`, and so are the
bidirectional overrides, embeddings and isolates (U+202A-U+202E,
U+2066-U+2069), which would make a line read in another order, and the
characters a terminal draws as nothing (U+200B, U+200E, U+200F, U+2060,
U+FEFF) or as a break the text does not have (U+2028, U+2029). Line breaks and
tabs stay (a CR before a line feed is dropped); JSON output is never touched.
"""

from __future__ import annotations

import re

_KEEP = {"\n", "\t"}
_VISIBLE = {cp: f"^{chr(cp + 64)}" for cp in range(0x20) if chr(cp) not in _KEEP}
_VISIBLE[0x7F] = "^?"
_VISIBLE.update({cp: f"<U+{cp:04X}>" for cp in range(0x80, 0xA0)})
# The bidirectional embeddings, overrides and isolates (CVE-2021-42574): a
# terminal would draw the rest of the line in another order than it is.
_VISIBLE.update({cp: f"<U+{cp:04X}>" for cp in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))})
# Characters a terminal draws as nothing, or as a line break the text does not
# have: a zero-width space, the left-to-right and right-to-left marks, the
# line and paragraph separators, the word joiner and a stray byte order mark.
# (Zero-width joiners and non-joiners stay: emoji sequences and several
# scripts are written with them.)
_VISIBLE.update({cp: f"<U+{cp:04X}>" for cp in (0x200B, 0x200E, 0x200F, 0x2028, 0x2029, 0x2060, 0xFEFF)})


def visible(text: str) -> str:
    """`text` with every terminal control character shown as a visible
    escape (module docstring); line feeds and tabs kept."""
    return text.replace("\r\n", "\n").translate(_VISIBLE)


_BACKTICKS = re.compile(r"`+")


_MARKDOWN = re.compile(r"([\\`*_\[\]()<>#!|~])")


def _line(text: str) -> str:
    """Text from a log on a heading's or list item's line: on that line, and
    its Markdown characters escaped (a title must not render as a link or a
    remote image)."""
    return _MARKDOWN.sub(r"\\\1", " ".join(text.split()))


def _ticks(text: str, least: int) -> str:
    """A run of backticks longer than any in `text`, and at least `least`
    long: it opens and closes Markdown code that `text` cannot end."""
    return "`" * max(least, 1 + max((len(m.group()) for m in _BACKTICKS.finditer(text)), default=0))


def _code(text: str) -> str:
    """Text from a log as an inline code span."""
    text = " ".join(text.split())
    ticks = _ticks(text, 1)
    return f"{ticks} {text} {ticks}" if "`" in text else f"{ticks}{text}{ticks}"


def _fenced(text: str) -> list[str]:
    """A message's text as a fenced code block whose fence is longer than
    any run of backticks in it, so that nothing it holds (a line that reads
    like the next message's heading, a fence of its own left open) can end
    the block or pass for this document's structure: the headings are the
    renderer's alone."""
    fence = _ticks(text, 3)
    return [fence, text, fence]


def markdown(env) -> str:
    """A whole session (the envelope of `recall show`) as Markdown: a heading
    with its title, its id, source, project and start, then each message under
    its role and time, its text in a fenced block (what a log holds is shown,
    never read as Markdown: a message cannot forge another's heading).
    Control characters shown as in every human output."""
    out: list[str] = []
    for r in env.results:
        out += [f"# {_line(r.title or r.session_id)}", "",
                f"- session: {_code(r.session_id)} ({r.source})", f"- project: {_code(r.cwd)}",
                f"- started: {r.started_at or 'unknown'}", f"- messages: {len(r.passage.messages)}", ""]
        for m in r.passage.messages:
            out += [f"## {m.role}" + (f" · {_line(m.ts)}" if m.ts else ""), ""]
            if m.text:
                out += [*_fenced(m.text), ""]
            out += [f"- {mat.kind}: {_code(mat.name)} ({mat.bytes} bytes)" for mat in m.materials]
            if m.materials:
                out.append("")
    if env.redacted:
        out.append(f"*{env.redacted} secrets redacted*")
    return visible("\n".join(out).rstrip("\n") + "\n")


# --- search results, as `rg -C` prints matches -----------------------------------------

ROLE_WIDTH = 11  # tool_result
TIME_WIDTH = 16  # 2026-11-20 14:30
INDENT = 4 + TIME_WIDTH + 2 + ROLE_WIDTH + 2  # where a message's text starts
HIT_LINES = 6  # lines of a hit shown, around its first term, without --full
CONTEXT_LINES = 2  # lines of a neighbour
LINE_CHARS = 400  # a longer line (minified JSON, a base64 blob) is cut, without --full
# Tool calls whose arguments are whole file contents: only their first line
# (the tool and the path) unless --full.
PAYLOAD_TOOLS = ("edit", "write", "multiedit", "notebookedit", "apply_patch", "str_replace_based_edit_tool")


class Style:
    """SGR colours, or none (--color never, or not a terminal)."""

    def __init__(self, color: bool):
        self.color = color

    def _sgr(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.color and text else text

    def bold(self, text: str) -> str:
        return self._sgr("1", text)

    def dim(self, text: str) -> str:
        return self._sgr("2", text)

    def role(self, text: str) -> str:
        return self._sgr("36", text)

    def match(self, text: str) -> str:
        return self._sgr("1;31", text)

    def number(self, text: str) -> str:
        return self._sgr("1;32", text)


def when(ts: str | None) -> str:
    """A message's own time, local, to the minute (`2026-11-20 14:30`)."""
    import datetime as dt

    if not ts:
        return ""
    try:
        t = dt.datetime.fromisoformat(ts)
    except ValueError:
        return ts[:TIME_WIDTH]
    if t.tzinfo is not None:
        t = t.astimezone()
    return t.strftime("%Y-%m-%d %H:%M")


def highlight(text: str, terms: list[str], style: Style) -> str:
    """`text` (already visible) with every occurrence of a term marked."""
    if not style.color or not terms:
        return text
    low = text.casefold()
    spans = []
    for t in terms:
        start = low.find(t) if t else -1
        while start != -1:
            spans.append((start, start + len(t)))
            start = low.find(t, start + len(t))
    out, pos = [], 0
    for a, b in sorted(spans):
        if a < pos or len(low) != len(text):  # casefold changed lengths: positions would not hold
            continue
        out += [text[pos:a], style.match(text[a:b])]
        pos = b
    out.append(text[pos:])
    return "".join(out)


def _shown_lines(text: str, terms: list[str], keep: int | None, full: bool) -> tuple[list[str], int, int]:
    """The lines of a message to show: at most `keep` (None: all) from just
    before the first line holding a term; and how many were left out before
    and after."""
    lines = text.split("\n")
    if not full:
        lines = [ln if len(ln) <= LINE_CHARS else ln[:LINE_CHARS] + "…" for ln in lines]
    if keep is None or full or len(lines) <= keep:
        return lines, 0, 0
    first = next((i for i, ln in enumerate(lines) if any(t and t in ln.casefold() for t in terms)), 0)
    start = max(0, min(first - 1, len(lines) - keep))
    return lines[start:start + keep], start, len(lines) - start - keep


def _payload_head(text: str) -> tuple[list[str], int, int]:
    """A payload's head, whatever the hit: its tool line and the path it
    writes (the next line; in a patch, the line after `*** Begin Patch`);
    and how many lines are not shown."""
    lines, _, _ = _shown_lines(text, [], None, False)
    path = next((ln for ln in lines[1:3] if ln.strip() != "*** Begin Patch"), None)
    head = lines[:1] + ([path] if path is not None else [])
    return head, 0, len(lines) - len(head)


def _is_payload(m) -> bool:
    if m.role != "tool_call":
        return False
    name = m.text.split("\n", 1)[0].strip().casefold()
    return name in PAYLOAD_TOOLS


def passage_block(n: int | None, r, terms: list[str], style: Style, *, full: bool, whole: bool) -> list[str]:
    """One result as lines: a header (its number, title, short session id,
    project), then each message under its time and role, continuation lines
    indented under the text; the anchor marked `>`. `whole`: every line of
    each message (recall more), else a few around the hit."""
    # (an id that held a secret is `redacted-` and a hash: its hash tells it apart)
    sid = r.session_id[: 8 + 9 * r.session_id.startswith("redacted-")] if len(r.session_id) > 12 else r.session_id
    head = [style.number(f"[{n}]")] if n is not None else []
    head += [style.bold(visible(r.title or "(untitled)")), style.dim(visible(sid)), style.dim(visible(r.cwd))]
    if r.partial:
        head.append(style.dim("matches only: " + ", ".join(visible(t) for t in r.matched_terms)))
    out = ["  ".join(head)]
    for m in r.passage.messages:
        keep: int | None = None if whole else HIT_LINES if m.is_hit or m.is_anchor else CONTEXT_LINES
        if _is_payload(m) and not full:
            lines, before, after = _payload_head(visible(m.text))
        else:
            lines, before, after = _shown_lines(visible(m.text), terms, keep, full)
        mark = "> " if m.is_anchor else "  "
        prefix = f"  {mark}{when(m.ts):<{TIME_WIDTH}}  {style.role(f'{m.role:<{ROLE_WIDTH}}')}  "
        pad = " " * INDENT
        shown = [highlight(ln, terms, style) if (m.is_hit or m.is_anchor) else ln for ln in lines]
        if before:
            shown.insert(0, style.dim(f"… ({before} line{'s' * (before != 1)} before)"))
        if after:
            shown.append(style.dim(f"… (+{after} line{'s' * (after != 1)}{'' if full else '; --full shows them'})"))
        out.append(prefix + (shown[0] if shown else ""))
        out += [pad + ln for ln in shown[1:]]
        for mat in m.materials:
            out.append(pad + style.dim(f"[{mat.kind}: {visible(mat.name)}, {mat.bytes} bytes]"))
    return out


# The envelope's hints are written for a model (MCP parameter names); on the
# command line the same advice names the command's own words.
_CLI_WORDS = [
    ("(all_projects; on the command line --all-projects)", "(--all-projects)"),
    ("all_projects (on the command line --all-projects)", "--all-projects"),
    ("recall_more(anchor_id)", "`recall more N`"),
    ("pass a result's next_cursor exactly as given", "give the --cursor a search printed, exactly"),
    # the confirm policy, said to the person at the command line
    ("the user could not be asked or did not answer", "no answer came (the question needs a terminal to "
                                                      "answer on, and standard input is not one, or it closed)"),
    ("or ask again once the user can answer", "or run the command again from a terminal and answer"),
    ("the user did not allow searching all projects", "you did not allow searching all projects"),
    ("pass next_cursor", "repeat the search with --cursor"),
    ("page with next_cursor", "repeat the search with --cursor"),
    ("without session_id", "without --session"),
    ("pass it as the cwd to search it", "search it with --cwd and that folder"),
    ("pass the cwd of", "pass --cwd with"),
    ("Pass the cwd of", "Pass --cwd with"),
    ("or with the cwd of one of them", "or with --cwd naming one of them"),
    ("(the user can list the indexed projects with `recall projects`)", "(`recall projects` lists them)"),
    ("Tell the user: add the folder of their session logs", "Add the folder of your session logs"),
    ("This is not an anchor_id from a recall result; pass a passage's anchor_id.",
     "This is not a passage's anchor; give the number of a passage of the last search (`recall more 2`) "
     "or an anchor it printed with --json."),
]


def cli_words(text: str) -> str:
    """A hint for a model, in the command line's words."""
    import re

    for model, cli in _CLI_WORDS:
        text = text.replace(model, cli)
    # a parameter named alone (not the config key `all_projects = "..."`)
    text = re.sub(r"\ball_projects\b(?! = )", "--all-projects", text)
    text = re.sub(r"\bsession_id\b", "--session", text)
    return re.sub(r"\bnext_cursor\b", "--cursor", text)


def results(env, style: Style, *, full: bool = False, whole: bool = False, numbered: bool = True) -> str:
    """Human output of a search (or of `recall more`): the partial-match
    notice first, one block per passage, then a line of what to do next."""
    out: list[str] = []
    terms = [t for t in env.diagnostics.terms if t]
    if env.status == "partial":
        quoted = ", ".join(repr(t) for t in terms)
        out += [style.bold(visible(f"No message contains all of {quoted}; the best partial matches:")), ""]
    for i, r in enumerate(env.results, 1):
        out += passage_block(i if numbered else None, r, terms, style, full=full, whole=whole)
        out.append("")
    sessions = len({(r.source, r.cwd, r.session_id) for r in env.results})
    n = len(env.results)
    tail = [f"{n} passage{'s' * (n != 1)} from {sessions} session{'s' * (sessions != 1)}."]
    if numbered:
        tail.append("`recall more N` widens passage N to its whole turn.")
    else:
        tail = [visible(cli_words(env.hint))]
    if env.next_cursor:
        tail.append(f"Next page: repeat the search with --cursor {env.next_cursor}")
    out.append(style.dim(" ".join(tail)))
    for k, v in env.gaps.items():
        out.append(style.dim(visible(f"note ({k}): {cli_words(v)}")))
    return "\n".join(out) + "\n"
