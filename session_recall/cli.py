"""The `recall` command: parse flags, call the API, print. Nothing else."""

from __future__ import annotations

import os
import signal
import sys

import click
import orjson

from .index import Index
from .indexer.sync import KINDS
from .store import WriterBusy


def _dump(value) -> None:
    sys.stdout.write(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode() + "\n")


def _open(ctx: click.Context) -> Index:
    return Index.open(ctx.obj["db"])


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--db", type=click.Path(dir_okay=False), envvar="RECALL_DB", default=None,
              help="Index database (default: $RECALL_DB, else recall.db under the XDG data dir).")
@click.pass_context
def main(ctx: click.Context, db: str | None) -> None:
    """Recall what was said in past agent sessions."""
    ctx.ensure_object(dict)
    ctx.obj["db"] = db


def _print_report(r, *, prefix: str = "") -> None:
    d = r.as_dict()
    skipped = ", ".join(f"{k} {v}" for k, v in d["skipped"].items()) or "none"
    click.echo(
        f"{prefix}{d['files']} files ({d['files_read']} read, {d['bytes_read'] / 1e6:.2f} MB, {d['lines']} lines) "
        f"in {d['elapsed_s']:.2f}s: {d['messages_added']} messages added, {d['messages_updated']} updated; "
        f"skipped: {skipped}"
    )


@main.command()
@click.argument("paths", nargs=-1)
@click.option("--kind", type=click.Choice(KINDS), default="auto", show_default=True)
@click.option("--prune", is_flag=True, help="Forget sessions whose log files were deleted (kept by default).")
@click.option("--json", "as_json", is_flag=True, help="Print the sync report as JSON.")
@click.pass_context
def index(ctx: click.Context, paths: tuple[str, ...], kind: str, prune: bool, as_json: bool) -> None:
    """One incremental sync of PATHS (or of every source already indexed)."""
    with _open(ctx) as ix:
        try:
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
            raise click.ClickException(str(e)) from None
    if as_json:
        _dump(report.as_dict())
    else:
        _print_report(report, prefix="indexed ")


@main.command()
@click.argument("paths", nargs=-1)
@click.option("--kind", type=click.Choice(KINDS), default="auto", show_default=True)
@click.pass_context
def watch(ctx: click.Context, paths: tuple[str, ...], kind: str) -> None:
    """Reconcile PATHS, then keep the index current as the logs change."""
    from .indexer.watch import Watcher

    with _open(ctx) as ix:
        def on_sync(report) -> None:
            if report.bytes_read or report.files_missing or report.files_renamed:
                _print_report(report, prefix="synced ")

        watcher = Watcher(ix.store, list(paths) or None, kind, on_sync=on_sync)

        def stop(signum, frame) -> None:
            watcher.stop()

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        click.echo(f"watching {', '.join(paths) or 'known sources'} into {ix.store.path} (Ctrl-C stops)", err=True)
        try:
            watcher.run()
        except WriterBusy as e:
            raise click.ClickException(str(e)) from None
    click.echo("stopped", err=True)


@main.command()
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def status(ctx: click.Context, as_json: bool) -> None:
    """What the index holds: sessions, messages, skipped lines by reason, sources."""
    with _open(ctx) as ix:
        st = ix.status()
    if as_json:
        _dump(st)
        return
    click.echo(f"{st['db']}: {st['sessions']} sessions, {st['messages']} messages "
               f"({st['streaming']} still streaming), {st['db_bytes'] / 1e6:.2f} MB")
    click.echo(f"schema {st['schema_version']}, tokenizer {st['tokenizer_version']}, "
               f"redactor {st['redactor_version']}" + (" (stale: the next index rebuilds)" if st["stale"] else ""))
    for s in st["sources"]:
        click.echo(f"  {s['kind']:<10} {s['path']}  {s['files']} files, last indexed {s['last_indexed_at']}")
    if st["skipped"]:
        click.echo("skipped: " + ", ".join(f"{k} {v}" for k, v in st["skipped"].items()))


@main.command()
@click.argument("query")
@click.option("--limit", type=int, default=5, show_default=True)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def search(ctx: click.Context, query: str, limit: int, as_json: bool) -> None:
    """Messages that contain every term of QUERY, best first."""
    with _open(ctx) as ix:
        hits = ix.search(query, limit=limit)
    if as_json:
        _dump([{"session": s, "message_id": h.message_id, "role": h.role, "ts": h.ts, "text": h.text,
                "score": h.score} for h, s in hits])
        return
    if not hits:
        click.echo(f"no message matches {query!r}")
    for h, s in hits:
        click.echo(f"{s['title'] or s['session_id']}  ·  {(h.ts or '')[:10]}  ·  {s['cwd']}")
        text = h.text if len(h.text) <= 300 else h.text[:300] + "…"
        click.echo(f"  [{h.role}] {text}\n")


if __name__ == "__main__":
    main()
