"""``aiblox cache``: what the stage cache holds, prune it, verify it
(:mod:`aiblox.engine.housekeeping`)."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

import typer

from aiblox.cli._common import (
    console,
    fail,
    out,
    print_json,
    show_progress,
    size_text,
    stored_text,
)
from aiblox.cli._defaults import STAGE_CACHE_DIR

if TYPE_CHECKING:
    from aiblox.engine.cache import StageCache

cache_app = typer.Typer(
    name="cache",
    help="The stage cache (.aiblox/stages): what it holds, pruning it, verifying it.",
    no_args_is_help=True,
    add_completion=False,
)

CACHE_DIR_HELP = "The stage cache: a folder or an fsspec URI (s3://..., gs://...)."
STAGE_HELP = "Only this stage's entries (repeatable; default: every stage)."


def _when(t: float | None) -> str:
    if t is None:
        return "-"
    return dt.datetime.fromtimestamp(t, tz=dt.UTC).strftime("%Y-%m-%d %H:%M")


def _open(cache_dir: str) -> StageCache:
    """The cache at ``cache_dir``, or one ``error:`` line: a file, an unknown protocol, a
    local folder (a path, ``file://`` or ``local://``) that is not there and not the default
    (a mistyped name, which would read as an empty cache), a folder that holds files but
    nothing of a stage cache's layout (a wrong folder: prune must never touch its files,
    :func:`~aiblox.engine.housekeeping.check_stage_cache`)."""
    from pathlib import Path

    from aiblox.engine.cache import StageCache, StageCacheError, local_cache_root
    from aiblox.engine.housekeeping import check_stage_cache

    proto, _, path = cache_dir.partition("://")
    local = Path(path) if proto == "local" else local_cache_root(cache_dir)
    if local is not None and local.exists() and not local.is_dir():
        fail(f"--cache-dir {cache_dir} is a file, not a stage cache folder")
    if local is not None and not local.exists() and cache_dir != STAGE_CACHE_DIR:
        fail(f"--cache-dir {cache_dir}: no such folder (a sweep's --cache-dir; the default "
             f"is {STAGE_CACHE_DIR})")
    try:
        cache = StageCache(cache_dir)
        check_stage_cache(cache)
    except (StageCacheError, OSError) as exc:
        fail(f"--cache-dir {cache_dir}: {exc}")
        raise
    except ValueError as exc:  # not a stage cache: "<root> is not a stage cache: ..."
        fail(f"--cache-dir {exc}")
        raise
    return cache


@cache_app.command("list")
def list_cache(
    cache_dir: str = typer.Option(STAGE_CACHE_DIR, "--cache-dir", help=CACHE_DIR_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Every folder of the cache: entries, size, oldest and newest write (UTC), and files that
    interrupted writes left behind. Stage folders are pruned; doc_tables go with their signals
    entries; models and studies are kept (a trained model, a folder of files, is one entry).
    A --cache-dir that is not there (but the default), or holds nothing of a stage cache, is
    an error, as for prune and verify."""
    from aiblox.engine.housekeeping import cache_usage

    cache = _open(cache_dir)
    rows = cache_usage(cache)
    total = sum(r.size + r.leftover_size for r in rows)
    if as_json:
        print_json({"root": str(cache.root), "size": total, "folders": [
            {"folder": r.folder, "kind": r.kind, "entries": r.entries, "size": r.size,
             "oldest": r.oldest, "newest": r.newest, "leftovers": r.leftovers,
             "leftover_size": r.leftover_size} for r in rows]})
        return
    if not rows:
        out.print(f"stage cache {cache.root}: empty (nothing cached yet)")
        return
    from rich.table import Table

    # the stage entries' part as the sweep's line and `cache verify` give it, then the rest
    stages = [r for r in rows if r.kind == "stage"]
    rest = total - sum(r.size for r in stages)
    # folder names as the disk has them: escaped, never read as rich markup
    table = Table(title=stored_text(f"stage cache {cache.root}: {size_text(total)} ("
                                    f"{sum(r.entries for r in stages)} stage entries in "
                                    f"{size_text(sum(r.size for r in stages))}"
                                    + (f", other files {size_text(rest)}" if rest else "")
                                    + ")"))
    for col in ("folder", "kind", "entries", "size", "oldest (UTC)", "newest (UTC)",
                "leftovers"):
        table.add_column(col, justify="right" if col in ("entries", "size") else "left")
    for r in rows:
        left = f"{r.leftovers} ({size_text(r.leftover_size)})" if r.leftovers else "-"
        table.add_row(*(stored_text(cell) for cell in (
            r.folder, r.kind, str(r.entries), size_text(r.size), _when(r.oldest),
            _when(r.newest), left)))
    out.print(table)


@cache_app.command("prune")
def prune(
    cache_dir: str = typer.Option(STAGE_CACHE_DIR, "--cache-dir", help=CACHE_DIR_HELP),
    stage: list[str] = typer.Option([], "--stage", help=STAGE_HELP),
    older_than: str = typer.Option("", "--older-than", help="Remove entries written longer "
                                   "ago than this: 30d, 12h, 90m, 2w."),
    max_size: str = typer.Option("", "--max-size", help="Then remove the oldest until the "
                                 "entries take at most this: 2GiB, 500MB, bytes (the entries "
                                 "alone: the document tables kept beside the signals go with "
                                 "them, and `cache list` shows them apart)."),
    everything: bool = typer.Option(False, "--all", help="Remove every entry (of --stage: "
                                    "also those a kept entry of another stage was computed "
                                    "from)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Remove nothing (damaged entries "
                                 "neither); say what would go."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Remove stage entries: older than an age, the oldest beyond a size, or all. By age or
    size, never an entry that a kept one was computed from (a fusion sweep's retrieval goes
    last); --all --stage removes the stage's entries whatever was computed from them. By age or
    size, damaged entries met go too, counted apart. A removed entry is computed again, with
    the same bytes, when a sweep next needs it. Models and search studies are never touched."""
    from aiblox.engine.housekeeping import parse_age, parse_size, prune_cache
    from aiblox.experiment.markup import plural

    if not (older_than or max_size or everything):
        fail("say what to remove: --older-than AGE, --max-size SIZE or --all "
             "(with --dry-run to see it first)")
    age: float | None = None
    size: int | None = None
    try:
        age = parse_age(older_than) if older_than else None
    except ValueError as exc:
        fail(f"--older-than: {exc}")
    try:
        size = parse_size(max_size) if max_size else None
    except ValueError as exc:
        fail(f"--max-size: {exc}")
    cache = _open(cache_dir)
    try:
        r = prune_cache(cache, stages=stage or None, older_than=age, max_size=size,
                        everything=everything, dry_run=dry_run)
    except ValueError as exc:
        fail(str(exc))
        return
    by_stage: dict[str, list[int]] = {}
    for e in r.removed:
        n = by_stage.setdefault(e.stage, [0, 0])
        n[0] += 1
        n[1] += e.size
    kept_size = sum(e.size for e in r.kept)  # of the stages pruned: what --max-size bounds
    others_size = sum(e.size for e in r.others)
    damaged_size = sum(e.size for e in r.damaged)
    if as_json:
        print_json({"root": str(cache.root), "dry_run": dry_run, "freed": r.freed,
                    "removed": {s: {"entries": n, "size": b} for s, (n, b) in by_stage.items()},
                    "damaged": {"entries": len(r.damaged), "size": damaged_size},
                    "kept": {"entries": len(r.kept) + len(r.others),
                             "size": kept_size + others_size,
                             "of_stages": {"entries": len(r.kept), "size": kept_size}},
                    "leftovers": len(r.leftovers), "doc_tables": len(r.doc_tables)})
        return
    verb = "would remove" if dry_run else "removed"
    parts = [f"{s} {n} ({size_text(b)})" for s, (n, b) in sorted(by_stage.items())]
    extra = []
    if r.damaged:
        extra.append(f"{plural(len(r.damaged), 'damaged entry', 'damaged entries')} "
                     f"({size_text(damaged_size)})")
    if r.leftovers:
        extra.append(f"{len(r.leftovers)} leftover files")
    if r.doc_tables:
        extra.append(f"{len(r.doc_tables)} document tables")
    out.print(f"{verb} {plural(len(r.removed), 'entry', 'entries')}: "
              f"{', '.join(parts) or 'none'}"
              + (f"; and {', '.join(extra)}" if extra else "")
              + f"; {size_text(r.freed)} in all")
    of_stages = (f": {len(r.kept)} of {', '.join(stage)} ({size_text(kept_size)}), "
                 f"{len(r.others)} of the other stages" if stage else "")
    console.print(f"{'would keep' if dry_run else 'kept'} "
                  f"{plural(len(r.kept) + len(r.others), 'entry', 'entries')} "
                  f"({size_text(kept_size + others_size)}) in {cache.root}{of_stages}")
    if r.damaged and dry_run:
        console.print("damaged entries: their meta does not parse, or lies past the end of a "
                      "pack cut short; `aiblox cache verify` checks every entry's bytes and "
                      "removes the damaged ones")
    if size is not None and kept_size > size:
        console.print(f"still above --max-size {max_size}: what is left was computed into "
                      f"entries of stages not named by --stage (kept while those are)")


@cache_app.command("verify")
def verify(
    cache_dir: str = typer.Option(STAGE_CACHE_DIR, "--cache-dir", help=CACHE_DIR_HELP),
    stage: list[str] = typer.Option([], "--stage", help=STAGE_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Read every entry back and check it against the sha256 recorded when it was written;
    remove the damaged ones (computed again when next needed). Exit 1 when any was damaged."""
    from aiblox.engine.housekeeping import verify_cache
    from aiblox.experiment.markup import plural

    cache = _open(cache_dir)
    try:
        r = verify_cache(cache, stage or None, progress=show_progress())
    except ValueError as exc:
        fail(str(exc))
        return
    if as_json:
        print_json({"root": str(cache.root), "checked": r.checked, "size": r.size,
                    "damaged": [{"stage": s, "key": k, "reason": why}
                                for s, k, why in r.damaged]})
    else:
        for s, k, why in r.damaged:
            out.print(stored_text(f"damaged, removed: {s}/{k if '/' in k else k[:16]}: {why}"),
                      soft_wrap=True)
        out.print(f"checked {plural(r.checked, 'entry', 'entries')} ({size_text(r.size)}): "
                  f"{len(r.damaged) or 'none'} damaged")
    if r.damaged:
        raise typer.Exit(1)
