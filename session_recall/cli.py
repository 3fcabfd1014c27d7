"""The `recall` command: parse flags, call the API, print. Nothing else."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import re
import shlex
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

import apsw
import click
import orjson

from . import KINDS, Index, WriterBusy, paths, terminal
from .config import ConfigError, default_db, load_settings
from .model import SEARCHABLE_ROLES
from .terminal import visible


def _dump(value) -> None:
    sys.stdout.write(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode() + "\n")


# The exit status of `search` and `more`, by the envelope's status, as grep's
# (README, "Exit codes"): 0 passages found, 1 no message matches (partial
# matches may be printed; an empty index matched nothing either), 2 bad input
# or an error, 3 refused (a credential-shaped query) or denied (by the
# all_projects policy or the user).
EXIT_FOUND, EXIT_NO_MATCH, EXIT_ERROR, EXIT_REFUSED = 0, 1, 2, 3
EXIT_STATUS = {
    "ok": EXIT_FOUND,
    "partial": EXIT_NO_MATCH, "no_match": EXIT_NO_MATCH, "empty_index": EXIT_NO_MATCH,
    "empty_query": EXIT_ERROR, "stale_cursor": EXIT_ERROR, "unknown_session": EXIT_ERROR,
    "unknown_anchor": EXIT_ERROR, "bad_argument": EXIT_ERROR,
    "refused": EXIT_REFUSED, "denied": EXIT_REFUSED,
}


def _echo(message: str, *, err: bool = False) -> None:
    """A line for a person: control characters from logs or paths shown, not sent (terminal.visible)."""
    click.echo(visible(message), err=err)


def _open(ctx: click.Context) -> Index:
    try:
        return Index.open(ctx.obj["db"], config=ctx.obj["config"])
    except ConfigError as e:
        raise click.ClickException(str(e)) from None


def _remember(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    """A global option given after the subcommand (`recall search foo --db x.db`)."""
    if value is not None and param.name:
        ctx.ensure_object(dict)[param.name] = value


def _global_options() -> list[click.Parameter]:
    return [click.Option(["--db"], type=click.Path(dir_okay=False), expose_value=False, callback=_remember,
                         help="Index database (also before the command)."),
            click.Option(["--config"], type=click.Path(dir_okay=False), expose_value=False, callback=_remember,
                         help="Settings file (also before the command).")]


class _Group(click.Group):
    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        """Every command takes the global options after its name too."""
        cmd.params.extend(_global_options())
        super().add_command(cmd, name)

    def invoke(self, ctx: click.Context):
        try:
            try:
                return super().invoke(ctx)
            except (apsw.CorruptError, apsw.NotADBError) as e:
                raise click.ClickException(
                    f"the index database is damaged ({e}). `recall doctor` checks it; `recall doctor --repair` "
                    "moves it aside and rebuilds it from the session logs.") from None
            except (apsw.ReadOnlyError, apsw.FullError, apsw.IOError, apsw.CantOpenError) as e:
                db = (ctx.obj or {}).get("db") or default_db()
                if isinstance(e, apsw.ReadOnlyError):
                    why = ("cannot be written: the file, its folder or its file system is read-only. Searches "
                           "still work; to index, make them writable, or give --db a writable path (the index "
                           "is derived: `recall index` builds it again from the session logs)")
                else:
                    why = ("could not be written (a full disk, or a limit on file size?). Nothing of the logs "
                           "is lost and nothing half-written is kept: each batch commits with its offsets, so "
                           "what was indexed stays searchable, and `recall index` resumes where this stopped "
                           "once there is room")
                raise click.ClickException(f"the index database {db} {why} ({e}).") from None
        except click.ClickException as e:
            if (isinstance(e, click.NoSuchOption) and e.ctx is not None and e.ctx.command.name == "search"
                    and not e.possibilities):
                # `recall search '->'`: words that start with a dash read as an option
                # (click names only a part of such a word, so none is quoted back)
                e.message = e.message.rstrip(".") + (". To search for words that start with '-', put -- after "
                                                     "the options and before the words: recall search [OPTIONS] "
                                                     "-- WORDS...")
            # Through vars(): click 8.5 types both as final (mypy); they are
            # what show() prints and the exit status.
            vars(e).update(message=visible(e.message),  # a path or a log's words, on a terminal
                           exit_code=max(e.exit_code, EXIT_ERROR))  # as grep: 1 is "no match", an error is 2
            raise


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--db", type=click.Path(dir_okay=False), envvar="RECALL_DB", default=None,
              help="Index database (default: $RECALL_DB, else recall.db under the XDG data dir).")
@click.option("--config", type=click.Path(dir_okay=False), envvar="RECALL_CONFIG", default=None,
              help="Settings file (default: config.toml under the XDG config dir).")
@click.version_option(package_name="session-recall", prog_name="recall")
@click.pass_context
def main(ctx: click.Context, db: str | None, config: str | None) -> None:
    """Recall what was said in past agent sessions."""
    ctx.ensure_object(dict)
    ctx.obj["db"] = db
    ctx.obj["config"] = config


def _n(count: int, word: str) -> str:
    return f"{count} {word}{'s' * (count != 1)}"


def _print_report(r, *, prefix: str = "") -> None:
    d = r.as_dict()
    skipped = ", ".join(f"{k} {v}" for k, v in d["skipped"].items()) or "none"
    _echo(
        f"{prefix}{_n(d['files'], 'file')} ({d['files_read']} read, {d['bytes_read'] / 1e6:.2f} MB, "
        f"{_n(d['lines'], 'line')}) "
        f"in {d['elapsed_s']:.2f}s: {_n(d['messages_added'], 'message')} added, {d['messages_updated']} updated"
        + (f", {d['messages_forgotten']} taken back by their logs" if d["messages_forgotten"] else "") + "; "
        f"skipped: {skipped}"
    )
    if d["wiped"] or d["vacuumed"]:
        _echo(
            f"wiped {_n(d['wiped'], 'forgotten message')} in {d['wipe_s']:.2f}s (FTS5 merged, freed pages "
            f"zeroed{', file vacuumed' if d['vacuumed'] else ''}, WAL truncated)"
            + (" - not finished: a reader held an old snapshot; the next pass wipes" if d["wipe_pending"] else "")
        )


def _say_defaults(ix: Index) -> None:
    """Register the default sources and say which they are (on stderr)."""
    origin, sources = ix.register_default_sources()
    where = "configured sources" if origin == "config" else "default locations found"
    if sources:
        _echo(f"{where}: " + ", ".join(f"{p} ({k})" for p, k in sources), err=True)
    else:
        _echo("no sources configured and no harness's folder found (Claude Code, Codex, Gemini CLI...); "
                   "give a PATH, or add [[sources]] to the config", err=True)


@main.command()
@click.argument("paths", nargs=-1)
@click.option("--kind", type=click.Choice(KINDS), default="auto", show_default=True)
@click.option("--prune", is_flag=True, help="Forget sessions whose log files were deleted (kept by default).")
@click.option("--json", "as_json", is_flag=True, help="Print the sync report as JSON.")
@click.pass_context
def index(ctx: click.Context, paths: tuple[str, ...], kind: str, prune: bool, as_json: bool) -> None:
    """One incremental sync of PATHS; with none, of the configured sources (else
    the harnesses' folders found on this machine: Claude Code, Codex, Gemini
    CLI, OpenCode, Cursor, Copilot CLI, Pi) and every source indexed before."""
    with _open(ctx) as ix:
        try:
            _must_exist(ctx, paths)
            if not paths:
                _say_defaults(ix)
            if sys.stderr.isatty() and not as_json:
                from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn

                with Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(),
                              transient=True) as bar:
                    task = bar.add_task("indexing", total=None)

                    def progress(path: str, done: int, total: int) -> None:
                        bar.update(task, description=os.path.basename(path)[-40:], completed=done, total=total)

                    report = ix.sync(list(paths) or None, kind, prune=prune, progress=progress)
            else:
                report = ix.sync(list(paths) or None, kind, prune=prune)
        except WriterBusy as e:
            _hand_to_watcher(ix, e, list(paths), kind)
            return
    if as_json:
        _dump(report.as_dict())
    else:
        _print_report(report, prefix="indexed ")


def _must_exist(ctx: click.Context, paths: tuple[str, ...] | list[str]) -> None:
    """A PATH that does not exist stops the command (exit 2) before anything is registered."""
    for p in paths:
        if not os.path.exists(os.path.expanduser(p)):
            _echo(f"recall: {p}: no such file or directory", err=True)
            ctx.exit(2)


HANDOVER_WAIT_S = 30.0


def _hand_to_watcher(ix: Index, busy: WriterBusy, paths: list[str], kind: str) -> None:
    """`recall index` while `recall watch` holds the index: the watcher takes
    the new sources (and says when it indexed them); any other writer: say so."""
    import time

    pid = ix.watcher_pid()
    if pid is None:
        raise click.ClickException(str(busy))
    if not paths:
        _echo(f"recall watch (pid {pid}) keeps {ix.path} current already: nothing to do", err=True)
        return
    ix.hand_to_watcher(paths, kind)
    _echo(f"recall watch (pid {pid}) holds {ix.path}: handed it {', '.join(paths)}", err=True)
    deadline = time.monotonic() + HANDOVER_WAIT_S
    waiting = list(paths)
    while waiting and time.monotonic() < deadline:
        waiting = [p for p in waiting if not ix.source_indexed_at(p)]
        if waiting:
            time.sleep(0.1)
    for p in paths:
        if p in waiting:
            _echo(f"{p}: handed to recall watch (pid {pid}), still indexing; `recall status` shows when it is done")
        else:
            _echo(f"{p}: indexed by recall watch (pid {pid}), which keeps it current")


@main.command()
@click.argument("paths", nargs=-1)
@click.option("--kind", type=click.Choice(KINDS), default="auto", show_default=True)
@click.pass_context
def watch(ctx: click.Context, paths: tuple[str, ...], kind: str) -> None:
    """Reconcile PATHS, then keep the index current as the logs change."""
    with _open(ctx) as ix:
        if not paths:
            try:
                _say_defaults(ix)
            except WriterBusy as e:
                raise click.ClickException(str(e)) from None

        def on_sync(report) -> None:
            if report.bytes_read or report.files_missing or report.files_renamed:
                _print_report(report, prefix="synced ")

        def on_source(path: str, kind: str) -> None:
            _echo(f"new source: {path} ({kind}), indexed and watched", err=True)

        _must_exist(ctx, paths)
        watcher = ix.watcher(list(paths) or None, kind, on_sync=on_sync, on_source=on_source)

        def stop(signum, frame) -> None:
            watcher.stop()

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        _echo(f"watching {', '.join(paths) or 'known sources'} into {ix.path} (Ctrl-C stops)", err=True)
        try:
            watcher.run()
        except WriterBusy as e:
            raise click.ClickException(str(e)) from None
    _echo("stopped", err=True)


@main.group(cls=_Group, invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
@click.pass_context
def sources(ctx: click.Context, as_json: bool) -> None:
    """List the sources (folders of session logs) the index reads; `add` and
    `remove` change the list."""
    if ctx.invoked_subcommand is not None:
        return
    with _open(ctx) as ix:
        listed = ix.sources()
    if as_json:
        _dump(listed)
        return
    if not listed:
        _echo("no sources yet: `recall index` finds the harness folders, `recall sources add PATH` adds one")
    for s in listed:
        note = ", in the config" if s["configured"] else ""
        gone = f" ({s['missing_files']} deleted, their sessions kept)" if s["missing_files"] else ""
        _echo(f"{s['kind']:<12} {s['path']}  {_n(s['files'], 'file')}{gone}, "
              f"last indexed {s['last_indexed_at'] or 'never'}{note}")


@sources.command("add")
@click.argument("path")
@click.option("--kind", type=click.Choice(KINDS), default="auto", show_default=True)
@click.pass_context
def sources_add(ctx: click.Context, path: str, kind: str) -> None:
    """Add PATH as a source (`recall index` reads it; a running `recall watch` takes it at once)."""
    _must_exist(ctx, [path])
    with _open(ctx) as ix:
        try:
            real = ix.add_source(path, kind)
        except WriterBusy as e:
            _hand_to_watcher(ix, e, [path], kind)
            return
    _echo(f"added {real} ({kind}); `recall index` reads it")


@sources.command("remove")
@click.argument("path")
@click.pass_context
def sources_remove(ctx: click.Context, path: str) -> None:
    """Stop reading PATH; the sessions already read from it stay searchable."""
    with _open(ctx) as ix:
        configured = [s["path"] for s in ix.sources() if s["configured"]]
        try:
            removed = ix.remove_source(path)
        except WriterBusy as e:
            raise click.ClickException(str(e)) from None
    if not removed:
        _echo(f"recall: {path}: not a source (`recall sources` lists them)", err=True)
        ctx.exit(2)
    _echo(f"removed {path}; its sessions stay searchable")
    if os.path.realpath(os.path.expanduser(path)) in configured or path in configured:
        _echo("it is also in the config file's [[sources]]: remove it there, or `recall index` adds it back",
              err=True)


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
@click.pass_context
def projects(ctx: click.Context, as_json: bool) -> None:
    """The indexed projects (the roots to pass as --cwd), with their sessions
    and last activity, most recent first."""
    with _open(ctx) as ix:
        listed = ix.projects()
    if as_json:
        _dump(listed)
        return
    for p in listed:
        word = "session " if p["sessions"] == 1 else "sessions"
        # (local time, as search prints a message's; --json keeps the stored UTC)
        _echo(f"{terminal.when(p['last_activity']):<16}  {p['sessions']:>5} {word}  {p['root']}")


@main.command()
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def status(ctx: click.Context, as_json: bool) -> None:
    """What the index holds: sessions, messages, skipped lines by reason, sources."""
    db = Path(ctx.obj["db"] or default_db()).expanduser()
    if not db.exists():
        # A status is a look, not a first index: a mistyped --db is said, not created.
        try:
            load_settings(ctx.obj["config"])  # a bad configuration is still the first thing said
        except ConfigError as e:
            raise click.ClickException(str(e)) from None
        build = f"recall --db {shlex.quote(str(db))} index" if ctx.obj["db"] else "recall index"
        _echo(f"recall: no index at {db}: nothing was indexed there yet. `{build}` builds it; "
              "if you meant another index, check --db and RECALL_DB.", err=True)
        ctx.exit(EXIT_ERROR)
    with _open(ctx) as ix:
        st = ix.status()
    if as_json:
        _dump(st)
        return
    _echo(f"{st['db']}: {_n(st['sessions'], 'session')}, {_n(st['messages'], 'message')} "
               f"({st['streaming']} still streaming), {st['db_bytes'] / 1e6:.2f} MB")
    _echo(f"schema {st['schema_version']}, tokenizer {st['tokenizer_version']}, "
               f"redactor {st['redactor_version']}" + (" (stale: the next index rebuilds)" if st["stale"] else ""))
    for s in st["sources"]:
        _echo(f"  {s['kind']:<10} {s['path']}  {_n(s['files'], 'file')}, last indexed {s['last_indexed_at'] or 'never'}")
    if st["skipped"]:
        _echo("skipped: " + ", ".join(f"{k} {v}" for k, v in st["skipped"].items()))
    if st["wipe_pending"]:
        _echo(f"wipe pending: {st['wipe_pending']} deleted messages may still have bytes in the file "
                   "(the next `recall index` wipes them)")
    if st["waiting"]:
        _echo("waiting: " + ", ".join(f"{k} {v}" for k, v in st["waiting"].items())
                   + " (a log's last line has no newline yet; it is read when it comes)")


def _confirm_on_terminal(question: str) -> bool | None:
    """The `confirm` policy on a terminal: ask; no terminal means no answer."""
    if not sys.stdin.isatty():
        return None
    return click.confirm(visible(question), default=False, err=True)


def _confirm_for(all_projects: bool):
    """Under the `confirm` policy a terminal prompt asks only when the user
    typed --all-projects: a --cwd at `/`, `~` or above the project (which
    is an all-projects search too) is refused without it, never prompted.
    The user is asked once a command, whatever the command asks twice."""
    if not all_projects:
        return None
    answers: list[bool | None] = []

    def ask(question: str) -> bool | None:
        if not answers:
            answers.append(_confirm_on_terminal(question))
        return answers[0]
    return ask


_AGO = re.compile(r"(\d+)\s*(s|m|h|d|w)", re.IGNORECASE)
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def _instant(value: str | None, param: click.Parameter) -> str | None:
    """--since / --until as an ISO 8601 instant in UTC: a time ago (`7d`),
    a date (local midnight; for --until the midnight after it, so that the
    day is included), or a date and time (local unless it has an offset)."""
    if value is None:
        return None
    text = value.strip()
    ctx = click.get_current_context()
    ctx.meta.setdefault("given", {})[param.name] = value  # what was typed, for a message
    now = ctx.meta.setdefault("now", dt.datetime.now(dt.timezone.utc))  # one now for --since and --until
    if m := _AGO.fullmatch(text):
        when = now - dt.timedelta(seconds=int(m[1]) * _UNIT[m[2].lower()])
    else:
        try:
            if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
                day = dt.date.fromisoformat(text)
                if param.name == "until":
                    day += dt.timedelta(days=1)
                when = dt.datetime.combine(day, dt.time()).astimezone()
            else:
                when = dt.datetime.fromisoformat(text)
                when = when if when.tzinfo else when.astimezone()
            when = when.astimezone(dt.timezone.utc)  # (past year 1 or 9999 in UTC: OverflowError)
        except OverflowError:
            raise click.BadParameter(f"{value!r} is out of range: a time from year 1 to 9999, in UTC",
                                     param=param) from None
        except ValueError:
            raise click.BadParameter(f"{value!r} is not a date (2026-11-20), a date and time "
                                     "(2026-11-20T14:30, 2026-11-20T14:30:00Z) or a time ago (30m, 12h, 7d, 2w)",
                                     param=param) from None
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _query(words: tuple[str, ...]) -> str:
    """The words of the command line as one query: an argument holding white
    space is a phrase, quoted (unless it already carries quotes of its own)."""
    return " ".join(f'"{w}"' if any(c.isspace() for c in w) and '"' not in w else w for w in words)


def _style(color: str) -> terminal.Style:
    """--color: auto colours a terminal (not under NO_COLOR or TERM=dumb)."""
    if color == "auto":
        return terminal.Style(sys.stdout.isatty() and "NO_COLOR" not in os.environ
                              and os.environ.get("TERM") != "dumb")
    return terminal.Style(color == "always")


def _page(text: str, pager: bool) -> None:
    """Print `text`; on a terminal through the pager ($PAGER, else `less -R`;
    LESS=FRX unless set, so that an answer of one screen is simply printed)."""
    cmd = os.environ.get("PAGER", "less -R").strip()
    if not (pager and sys.stdout.isatty()) or cmd in ("", "cat"):
        sys.stdout.write(text)
        return
    import subprocess

    env = {**os.environ, "LESS": os.environ.get("LESS", "FRX")}
    try:
        proc = subprocess.Popen(cmd, shell=True, stdin=subprocess.PIPE, env=env)
    except OSError:
        sys.stdout.write(text)
        return
    assert proc.stdin is not None
    try:
        proc.stdin.write(text.encode(sys.stdout.encoding or "utf-8", "replace"))
        proc.stdin.close()
    except BrokenPipeError:  # the reader quit the pager early
        pass
    proc.wait()


@dataclass
class _Out:
    """How an answer is printed (the options every command that answers shares)."""

    as_json: bool = False
    color: str = "auto"
    full: bool = False
    pager: bool = True


def _output_options(f):
    f = click.option("--no-pager", "no_pager", is_flag=True, help="Never page (a pager runs only on a terminal).")(f)
    f = click.option("--full", is_flag=True, help="Show whole messages, Edit and Write payloads included.")(f)
    f = click.option("--color", type=click.Choice(["auto", "always", "never"]), default="auto",
                     show_default=True, help="Colour the output (auto: on a terminal).")(f)
    return click.option("--json", "as_json", is_flag=True, help="Print the envelope as JSON (lossless).")(f)


def _answer(env, out: _Out, *, whole: bool = False, numbered: bool = True) -> None:
    """The envelope on stdout: as JSON, or for a person (an answer without
    results is its hint, on stderr, as grep prints nothing on stdout)."""
    if out.as_json:
        sys.stdout.write(env.model_dump_json(indent=2) + "\n")
    elif env.results:
        _page(terminal.results(env, _style(out.color), full=out.full, whole=whole, numbered=numbered), out.pager)
    else:
        _echo(terminal.cli_words(env.hint), err=True)
        for k, v in env.gaps.items():
            _echo(f"note ({k}): {terminal.cli_words(v)}", err=True)


# --- the last search's anchors: `recall more 2` -------------------------------------------


def _last_search_file(db: Path) -> Path:
    """Beside the index, private as it is (its anchors name sessions and projects)."""
    return db.with_name(db.name + ".last-search")


def _remember_search(db: Path, env, cwd: str | None, all_projects: bool) -> None:
    """Keep the anchors of this search, and the scope it was asked in, for
    `recall more N`. A file of mode 0600 written whole, then renamed."""
    data = {"anchors": [r.passage.anchor_id for r in env.results], "all_projects": all_projects,
            "cwd": _path_text(os.path.abspath(cwd)) if cwd is not None else None,
            "caller_cwd": _path_text(paths.process_cwd())}
    path = _last_search_file(db)
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o600)
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), 0o600)
            fh.write(orjson.dumps(data))
        os.replace(tmp, path)
    except OSError:  # a read-only folder: `recall more N` will say there is no last search
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def _path_text(path: str) -> str:
    """A path as JSON can hold it, whatever its bytes (a folder name that is
    not UTF-8 reaches Python as lone surrogates): each byte one character."""
    return os.fsencode(path).decode("latin-1")


def _text_path(text: str | None) -> str | None:
    return os.fsdecode(text.encode("latin-1")) if isinstance(text, str) else None


def _last_search(db: Path) -> dict | None:
    try:
        data = orjson.loads(_last_search_file(db).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("anchors"), list) else None


@main.command()
@click.argument("words", nargs=-1)
@click.option("--question", "-q", default=None, help="A question in natural language; its keywords rank.")
@click.option("--all-projects", is_flag=True, help="Search every project (subject to the all_projects policy).")
@click.option("--cwd", default=None,
              help="Search the project at this directory (default: the current one). `/`, `~` or a folder above "
                   "the current project is an all-projects search for the all_projects policy (deny: refused; "
                   "confirm: only with --all-projects, which asks).")
@click.option("--session", "session_id", default=None,
              help="Only this session: its id or the first characters of it, in whichever project it is "
                   "(another project is an all-projects search for the policy).")
@click.option("--since", callback=lambda ctx, p, v: _instant(v, p), default=None, metavar="WHEN",
              help="Only messages from WHEN on: a date (2026-11-20, local time), a date and time (ISO 8601), "
                   "or a time ago (30m, 12h, 7d, 2w).")
@click.option("--until", callback=lambda ctx, p, v: _instant(v, p), default=None, metavar="WHEN",
              help="Only messages before WHEN (a date: up to the end of that day).")
@click.option("--role", "roles", type=click.Choice(SEARCHABLE_ROLES), multiple=True,
              help="Only messages of this role (repeat for several).")
@click.option("--source", "sources", type=click.Choice([k for k in KINDS if k != "auto"]), multiple=True,
              help="Only sessions of this source kind (repeat for several).")
@click.option("--limit", type=int, default=None, help="How many passages (default from the config).")
@click.option("--cursor", default=None, help="The next_cursor of a previous page.")
@_output_options
@click.pass_context
def search(ctx: click.Context, words: tuple[str, ...], question: str | None, all_projects: bool, cwd: str | None,
           session_id: str | None, since: str | None, until: str | None, roles: tuple[str, ...],
           sources: tuple[str, ...], limit: int | None, cursor: str | None, as_json: bool, color: str, full: bool,
           no_pager: bool) -> None:
    """Passages that contain every term of QUERY (and/or answer --question).
    Several words are one query, all of them must match; a word given with
    spaces in it (`recall search "source serif" font`) is one phrase."""
    if since is not None and until is not None and since >= until:  # both are UTC instants of one form
        given = ctx.meta["given"]
        end = ", the end of that day" if re.fullmatch(r"\d{4}-\d{2}-\d{2}", given["until"].strip()) else ""
        raise click.UsageError(f"--since {given['since']} ({since}) is not before --until {given['until']} "
                               f"({until}{end}): no message could match; swap them, or drop one")
    query = _query(words)
    confirm = _confirm_for(all_projects)
    with _open(ctx) as ix:
        located = None
        if session_id is not None:  # an id or a unique prefix, wherever the policy lets it be
            located = ix.locate_session(session_id, cwd=cwd, all_projects=all_projects, confirm=confirm)
        if located is not None and located.session_id is None:
            env = ix.show_located(located)
        else:
            env = ix.recall(query, question, all_projects=all_projects or bool(located and located.all_projects),
                            cwd=cwd, session_id=located.session_id if located else None, limit=limit,
                            cursor=cursor, confirm=confirm, roles=roles, sources=sources, since=since, until=until)
        wide = all_projects or bool(located and located.all_projects)
        if env.status in ("ok", "partial", "no_match"):
            _remember_search(ix.path, env, cwd, wide)
    code = EXIT_STATUS[env.status]
    if cwd is not None and env.status == "no_match" and "scope" in env.gaps and not os.path.isdir(cwd):
        # Nothing indexed lies there and there is no such folder: a mistyped path.
        code = EXIT_ERROR
        _echo(f"recall: --cwd {cwd}: no such directory", err=True)
    _answer(env, _Out(as_json, color, full, not no_pager))
    ctx.exit(code)


@main.command()
@click.argument("anchor")
@click.option("--cwd", default=None, help="The caller's project (default: the current directory, or that of "
                                          "the search that numbered the passage).")
@click.option("--all-projects", is_flag=True, help="The passage may be in any project (subject to the policy).")
@_output_options
@click.pass_context
def more(ctx: click.Context, anchor: str, cwd: str | None, all_projects: bool, as_json: bool, color: str,
         full: bool, no_pager: bool) -> None:
    """Widen a passage to its whole turn. ANCHOR is the number of a passage
    of the last search (`recall more 2`) or a passage's anchor_id; either is
    read in the scope of the search that found it, under the same policy."""
    with _open(ctx) as ix:
        last = _last_search(ix.path)
        caller_cwd = None
        if re.fullmatch(r"\d{1,4}", anchor.strip()):
            n = int(anchor)
            if last is None or not 1 <= n <= len(last["anchors"]):
                held = f"its {len(last['anchors'])} passages" if last else "none: no search was made with this index"
                raise click.UsageError(f"no passage {n} in the last search ({held}); "
                                       "give a number it printed, or an anchor_id")
            anchor = last["anchors"][n - 1]
        remembered = last is not None and anchor in last["anchors"]
        if remembered and cwd is None and not all_projects:  # the scope the search was asked in
            assert last is not None
            cwd, caller_cwd = _text_path(last["cwd"]), _text_path(last["caller_cwd"])
            all_projects = bool(last["all_projects"])
        env = ix.recall_more(anchor, cwd=cwd, all_projects=all_projects, confirm=_confirm_for(all_projects),
                             caller_cwd=caller_cwd)
        if env.status == "unknown_anchor" and not all_projects and ix.is_anchor(anchor):
            # An anchor of another project: under `allow` a search of all
            # projects would have found it, so it may be read; under
            # `confirm` that takes --all-projects (which asks); under `deny`
            # it stays unknown.
            if ix.settings.all_projects == "allow":
                wider = ix.recall_more(anchor, cwd=cwd, all_projects=True, caller_cwd=caller_cwd)
                env = wider if wider.status == "ok" else env
            elif ix.settings.all_projects == "confirm":
                env.hint += " If it comes from a search of another project or of all projects, add --all-projects."
    _answer(env, _Out(as_json, color, full, not no_pager), whole=True, numbered=False)
    ctx.exit(EXIT_STATUS[env.status])


@main.command()
@click.argument("session")
@click.option("--format", "fmt", type=click.Choice(["markdown", "json"]), default="markdown", show_default=True,
              help="Markdown to read or keep; json: the envelope, one result whose passage is the whole session.")
@click.option("--cwd", default=None, help="The caller's project (default: the current directory).")
@click.option("--all-projects", is_flag=True, help="The session may be in any project (subject to the policy).")
@click.option("--no-pager", "no_pager", is_flag=True, help="Never page (a pager runs only on a terminal).")
@click.pass_context
def show(ctx: click.Context, session: str, fmt: str, cwd: str | None, all_projects: bool, no_pager: bool) -> None:
    """Print a whole session (SESSION: its id, or the first characters of it):
    every message in order, redacted, as evidence."""
    with _open(ctx) as ix:
        env = ix.show(session, cwd=cwd, all_projects=all_projects, confirm=_confirm_for(all_projects))
    if fmt == "json":
        sys.stdout.write(env.model_dump_json(indent=2) + "\n")
    elif env.results:
        _page(terminal.markdown(env), not no_pager)
    else:
        _echo(terminal.cli_words(env.hint), err=True)
    ctx.exit(EXIT_STATUS[env.status])


@main.command()
@click.option("--confirm-timeout", type=click.FloatRange(min=0), default=50.0, show_default=True,
              help="Seconds to wait for the user's answer when the all_projects policy is `confirm`; "
                   "no answer means no.")
@click.pass_context
def mcp(ctx: click.Context, confirm_timeout: float) -> None:
    """Serve the tools recall and recall_more to an agent over MCP (stdio)."""
    from .mcp_server import serve

    with _open(ctx) as ix:
        serve(ix, confirm_timeout=confirm_timeout)


@main.command()
@click.option("--repair", is_flag=True, help="If the database is damaged, move it aside and rebuild it from its sources.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.pass_context
def doctor(ctx: click.Context, repair: bool, as_json: bool) -> None:
    """Check the database (SQLite and FTS5 integrity checks); with --repair,
    rebuild a damaged one from its sources. Exits 1 while it is damaged."""
    try:
        report = Index.doctor(ctx.obj["db"], repair=repair, config=ctx.obj["config"])
    except ConfigError as e:
        raise click.ClickException(str(e)) from None
    except WriterBusy as e:
        raise click.ClickException(str(e)) from None
    if as_json:
        _dump(report)
    else:
        _echo(report["message"], err=not report["ok"])
    ctx.exit(0 if report["ok"] else 1)


@main.command()
def schema() -> None:
    """Print the JSON Schema of the envelope that search, more and MCP return."""
    from .model import Envelope

    _dump(Envelope.model_json_schema())


if __name__ == "__main__":
    main()
