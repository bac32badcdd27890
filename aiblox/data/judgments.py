"""A dataset's files besides its corpus (queries, qrels, answers), checked as
:func:`~aiblox.data.load_dataset` checks them, without reading the corpus: what ``aiblox
ingest``, which streams the corpus, runs before any write, so a dataset that ingests is one
that evaluates. They are small files; the warnings that need the corpus (qrels rows of absent
documents) are left to the commands that load it."""

from __future__ import annotations

import warnings
from pathlib import Path

from aiblox.data.beir import read_qrels
from aiblox.data.dataset import read_answers, read_queries
from aiblox.data.find import available_splits, find_dataset
from aiblox.data.rules import NoHash
from aiblox.data.tables import tab_judged, tab_qrels_splits, tabular_source

__all__ = ["check_judgments"]


def check_judgments(name_or_path: str | Path) -> None:
    """Raise :class:`~aiblox.data.DatasetError` (file, line and field) at the first fault of
    the dataset's queries, qrels or answers files; a corpus alone (no queries, no qrels)
    passes."""
    path = find_dataset(name_or_path)
    src = tabular_source(path)
    apath: Path | None
    with warnings.catch_warnings():  # said by the commands that load the corpus too
        warnings.simplefilter("ignore")
        if src is None:
            qpath, apath = path / "queries.jsonl", path / "answers.jsonl"
            queries = read_queries(path) if qpath.exists() else {}
            for base in available_splits(path):
                read_qrels(path / "qrels" / f"{base}.tsv", NoHash(), queries, {})
        else:
            queries = read_queries(path)
            known, split_rows = tab_qrels_splits(src, queries)
            for split in known:
                tab_judged(split, split_rows(split), {}, NoHash())
            apath = src.answers
        if apath is not None and apath.exists():
            read_answers(apath, NoHash(), queries, {})
