"""What a person reads on a terminal: text from session logs made safe to
print, and the colours the command line uses.

Logs hold whatever tools printed, terminal control sequences included (a
window title set with OSC 2, a clipboard written with OSC 52, a screen
cleared with CSI 2J). Printed as they are, they would act on the reader's
terminal. Human output therefore shows every control character as a visible
escape, as `cat -v` and `less` do: C0 controls in caret notation (`ESC` is
`^[`, `BEL` is `^G`), DEL as `^?`, C1 controls as `<U+009B>`. Line breaks and
tabs stay (a CR before a line feed is dropped); JSON output is never touched.
"""

from __future__ import annotations

_KEEP = {"\n", "\t"}
_VISIBLE = {cp: f"^{chr(cp + 64)}" for cp in range(0x20) if chr(cp) not in _KEEP}
_VISIBLE[0x7F] = "^?"
_VISIBLE.update({cp: f"<U+{cp:04X}>" for cp in range(0x80, 0xA0)})


def visible(text: str) -> str:
    """`text` with every terminal control character shown as a visible
    escape (module docstring); line feeds and tabs kept."""
    return text.replace("\r\n", "\n").translate(_VISIBLE)


def markdown(env) -> str:
    """A whole session (the envelope of `recall show`) as Markdown: a heading
    with its title, its id, source, project and start, then each message under
    its role and time. Control characters shown as in every human output."""
    out: list[str] = []
    for r in env.results:
        out += [f"# {r.title or r.session_id}", "",
                f"- session: `{r.session_id}` ({r.source})", f"- project: `{r.cwd}`",
                f"- started: {r.started_at or 'unknown'}", f"- messages: {len(r.passage.messages)}", ""]
        for m in r.passage.messages:
            out += [f"## {m.role}" + (f" · {m.ts}" if m.ts else ""), ""]
            if m.text:
                out += [m.text, ""]
            out += [f"*{mat.kind}: {mat.name} ({mat.bytes} bytes)*" for mat in m.materials]
            if m.materials:
                out.append("")
    if env.redacted:
        out.append(f"*{env.redacted} secrets redacted*")
    return visible("\n".join(out).rstrip("\n") + "\n")
