"""A tiny collection in BEIR layout (six documents, three queries) opened as a real DuckDB
workspace with the hashing embedder, for the dense feedback and rescoring tests; and
:func:`write_beir`, any such collection's files (the engine's edge-case tests)."""

from __future__ import annotations

import json
from pathlib import Path

DOCS = {
    "a1": "apple orchards grow apple trees in cool climates",
    "a2": "apple pie needs apples butter and flour",
    "b1": "banana plantations need heat and rain",
    "b2": "banana bread uses ripe bananas and flour",
    "c1": "cherry trees blossom in spring in cool climates",
    "c2": "flour milling grinds grain into flour",
}
QUERIES = {"q1": "apple trees", "q2": "banana flour", "q3": "cool climates"}
QRELS = [("q1", "a1"), ("q2", "b2"), ("q3", "c1")]


def write_beir(folder: Path, docs: dict[str, str], queries: dict[str, str],
               qrels: list[tuple[str, str]]) -> Path:
    """A collection in BEIR layout under ``folder``: ``docs`` and ``queries`` by id (no
    titles), ``qrels`` the test split's ``(query, document)`` pairs, each of grade 1."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "corpus.jsonl").write_text("".join(
        json.dumps({"_id": d, "title": "", "text": t}) + "\n" for d, t in docs.items()))
    (folder / "queries.jsonl").write_text("".join(
        json.dumps({"_id": q, "text": t}) + "\n" for q, t in queries.items()))
    (folder / "qrels").mkdir(exist_ok=True)
    (folder / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t1\n" for q, d in qrels))
    return folder


def write_tiny(folder: Path) -> Path:
    """The tiny collection's files under ``folder``."""
    return write_beir(folder, DOCS, QUERIES, QRELS)


def open_tiny(tmp: Path):
    """``(dataset, workspace)``: the tiny collection in a DuckDB store with hashing vectors."""
    from aiblox.data import load_dataset
    from aiblox.engine.workspace import open_workspace

    ds = load_dataset(write_tiny(tmp / "tiny"))
    ws = open_workspace(ds, db=str(tmp / "tiny.duckdb"), embedder="hashing", progress=False)
    return ds, ws
