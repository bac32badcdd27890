"""Where a dataset is (:func:`find_dataset`), its name, its splits and its corpus file, found
without loading it."""

from __future__ import annotations

import difflib
import os
from pathlib import Path

from aiblox.data.rules import CORPUS_FILES, DatasetError, NoHash
from aiblox.data.tables import (
    CORPUS_SUFFIXES,
    MANIFEST,
    QUERY_SUFFIXES,
    TABLE_SUFFIXES,
    manifest_path,
    one_file,
    read_manifest,
    resolve,
    row_split,
)

__all__ = ["available_splits", "corpus_file", "dataset_name", "find_dataset"]


def available_splits(path: str | Path) -> list[str]:
    """Split names that have a ``qrels/<split>.{tsv,csv,parquet}`` file, or that a manifest
    names (a qrels file with a ``split`` column is read to list its splits)."""
    p = Path(path)
    manifest = manifest_path(p)
    if manifest is None:
        qdir = p / "qrels"
        return sorted({q.stem for q in qdir.glob("*") if q.suffix in TABLE_SUFFIXES}) \
            if qdir.is_dir() else []
    src = read_manifest(manifest)[0]
    names = {s for s in src.qrels if s is not None}
    mixed = src.qrels.get(None)
    if mixed is not None:
        column = resolve(mixed, "qrels", src.columns.get("qrels", {}))["split"]
        names |= {row_split(row.get(column) if column else None, src.default_split)
                  for _, row in mixed.read(NoHash())}
    return sorted(str(n) for n in names)


def find_dataset(name_or_path: str | Path) -> Path:
    """Resolve a dataset name or path.

    A dataset is a folder holding ``queries.jsonl`` (BEIR), ``queries.{csv,tsv,parquet}``,
    a ``dataset.toml`` manifest or a BEIR corpus alone (documents to ingest and search, no
    queries to evaluate), or a ``*.toml`` manifest file (``<folder>/dataset.toml``
    resolves to its folder). Looks at the path itself, then ``<root>/<name>`` for each root
    in ``$AIBLOX_DATASETS`` (``os.pathsep``-separated), ``./datasets``,
    ``../shared/datasets``, and the same two folders relative to the source checkout aiblox
    was installed from.
    """
    p = Path(name_or_path)
    if p.name == MANIFEST and p.is_file():
        return p.parent
    if _is_dataset(p):
        return p
    roots = [r for r in os.environ.get("AIBLOX_DATASETS", "").split(os.pathsep) if r]
    repo = Path(__file__).resolve().parents[2]  # a source checkout: <repo>/aiblox/data
    roots += ["datasets", "../shared/datasets", str(repo / "datasets"),
              str(repo.parent / "shared" / "datasets")]
    for root in roots:
        candidate = Path(root) / str(name_or_path)
        if _is_dataset(candidate):
            return candidate
    # each folder once, as an absolute path (from the checkout, ./datasets is the repo's)
    shown = list(dict.fromkeys(str(Path(r).resolve()) for r in roots))
    names = sorted({d.name for r in shown if Path(r).is_dir() for d in Path(r).iterdir()
                    if _is_dataset(d)})
    near = difflib.get_close_matches(str(name_or_path), names, n=1, cutoff=0.75)
    raise DatasetError(name_or_path, None, "path",
                       f"no BEIR dataset here or under {', '.join(shown)} (need "
                       f"queries.jsonl, queries.csv/.tsv/.parquet, corpus.jsonl or {MANIFEST}; "
                       f"or a *.toml manifest)"
                       + (f"; did you mean {near[0]!r}?" if near else ""))


def _is_dataset(p: Path) -> bool:
    if p.is_file():
        return p.suffix == ".toml"
    return ((p / MANIFEST).exists() or any((p / f"queries{s}").exists() for s in QUERY_SUFFIXES)
            or any((p / f).exists() for f in CORPUS_FILES))  # documents alone: no queries


def corpus_file(path: str | Path) -> Path:
    """The file the corpus of the dataset at ``path`` (as :func:`find_dataset` gives it) is
    read from: ``corpus.jsonl`` or ``corpus.jsonl.gz`` of a BEIR folder, the
    ``corpus.{csv,tsv,parquet}`` of a tabular folder, or the manifest naming it (with its
    column names). :func:`iter_corpus` and :func:`corpus_hash` take any of them."""
    manifest = manifest_path(Path(path))
    if manifest is not None:
        return manifest
    return one_file(Path(path), "corpus", CORPUS_SUFFIXES)


def dataset_name(path: str | Path) -> str:
    """The default name of the dataset at ``path`` (as :func:`find_dataset` gives it): a
    manifest's ``name``, else its folder's name (or the file's stem when it is not
    ``dataset.toml``), the folder or file as resolved: a dataset reached through a symlink
    (``myadi -> datasets/adi``) is the folder it resolves to, named ``adi``, as the store it
    is ingested into records it (:func:`aiblox.engine.workspace.dataset_binding`: its name and
    resolved folder), so every command names it alike (``.`` is the folder it names)."""
    p = Path(path).resolve()
    manifest = manifest_path(p)
    if manifest is not None:
        data = read_manifest(manifest)[1]
        if "name" in data:
            return str(data["name"])
        return manifest.parent.name if manifest.name == MANIFEST else manifest.stem
    return p.name
