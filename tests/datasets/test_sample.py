"""The sample collection is valid, its generator is in sync, and the manifests match files.

These tests read the files directly (json, csv-free TSV parsing, tomllib, hashlib), not
through the generator, so a bug in the generator cannot hide a bad file.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import tomllib
from collections import Counter
from pathlib import Path

import pytest

from aiblox.hashing import sha256_hex

REPO = Path(__file__).resolve().parents[2]
DATASETS = REPO / "datasets"
SAMPLE = DATASETS / "sample"
MANIFESTS = DATASETS / "manifests"
SHARED = REPO / ".." / "shared" / "datasets"
SHARED_NAMES = ("adi", "cisi", "cranfield", "medline", "scifact", "squad-v1.1-dev", "vaswani")


def read_jsonl(path: Path) -> list[dict]:
    raw = path.read_bytes()
    assert b"\r" not in raw, f"{path}: CRLF line endings"
    assert raw.endswith(b"\n"), f"{path}: no final newline"
    return [json.loads(line) for line in raw.decode("utf-8").splitlines()]


def read_qrels(path: Path) -> list[tuple[str, str, int]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "query-id\tcorpus-id\tscore"
    rows = []
    for line in lines[1:]:
        qid, did, score = line.split("\t")
        rows.append((qid, did, int(score)))
    return rows


@pytest.fixture(scope="module")
def corpus() -> list[dict]:
    return read_jsonl(SAMPLE / "corpus.jsonl")


@pytest.fixture(scope="module")
def queries() -> list[dict]:
    return read_jsonl(SAMPLE / "queries.jsonl")


@pytest.fixture(scope="module")
def qrels() -> dict[str, list[tuple[str, str, int]]]:
    return {split: read_qrels(SAMPLE / "qrels" / f"{split}.tsv") for split in ("test", "train")}


# ------------------------------------------------------------------------------ sample


def test_corpus_records(corpus: list[dict]) -> None:
    assert len(corpus) == 40
    ids = [d["_id"] for d in corpus]
    assert ids == [f"d{i:02d}" for i in range(1, 41)]
    for d in corpus:
        assert set(d) == {"_id", "title", "text", "metadata"}
        assert set(d["metadata"]) == {"topic", "year"}
        assert isinstance(d["metadata"]["year"], int)
        assert d["title"].strip() and d["title"] == d["title"].strip()
        assert 80 <= len(d["text"].split()) <= 300, d["_id"]
    topics = Counter(d["metadata"]["topic"] for d in corpus)
    assert len(topics) == 6
    assert min(topics.values()) >= 6


def test_about_a_third_of_the_corpus_is_markdown_with_sections(corpus: list[dict]) -> None:
    markdown = [d for d in corpus if d["text"].startswith("# ")]
    assert 12 <= len(markdown) <= 16
    for d in markdown:
        lines = d["text"].splitlines()
        assert lines[0] == f"# {d['title']}"
        sections = [line for line in lines if line.startswith("## ")]
        assert len(sections) >= 3, d["_id"]
        # every heading stands alone between blank lines
        for i, line in enumerate(lines):
            if line.startswith("#"):
                assert i == 0 or lines[i - 1] == "", (d["_id"], line)
                assert lines[i + 1] == "", (d["_id"], line)
    plain = [d for d in corpus if not d["text"].startswith("# ")]
    assert all("\n" not in d["text"] for d in plain), "plain documents are one paragraph"


def test_queries_and_qrels_refer_to_existing_ids(
    corpus: list[dict], queries: list[dict], qrels: dict[str, list[tuple[str, str, int]]]
) -> None:
    doc_ids = {d["_id"] for d in corpus}
    query_ids = [q["_id"] for q in queries]
    assert query_ids == [f"q{i:02d}" for i in range(1, 17)]
    assert all(set(q) == {"_id", "text"} and q["text"].strip() for q in queries)
    judged = {split: {qid for qid, _, _ in rows} for split, rows in qrels.items()}
    assert judged["test"] == {f"q{i:02d}" for i in range(1, 13)}
    assert judged["train"] == {f"q{i:02d}" for i in range(13, 17)}
    for rows in qrels.values():
        pairs = [(qid, did) for qid, did, _ in rows]
        assert len(pairs) == len(set(pairs)), "a (query, doc) pair is judged twice"
        for qid, did, score in rows:
            assert qid in query_ids and did in doc_ids
            assert score in (1, 2)
        per_query = Counter(qid for qid, _, _ in rows)
        assert all(1 <= n <= 4 for n in per_query.values())
        assert all(any(s == 2 for q, _, s in rows if q == qid) for qid in per_query)


def test_answer_offsets_slice_back_to_the_answers(
    corpus: list[dict], queries: list[dict], qrels: dict[str, list[tuple[str, str, int]]]
) -> None:
    texts = {d["_id"]: d["text"] for d in corpus}
    relevant = {(q, d) for rows in qrels.values() for q, d, s in rows if s == 2}
    answers = read_jsonl(SAMPLE / "answers.jsonl")
    assert [a["_id"] for a in answers] == [q["_id"] for q in queries]
    for a in answers:
        assert set(a) == {"_id", "corpus-id", "answers", "answer_starts"}
        assert (a["_id"], a["corpus-id"]) in relevant
        assert len(a["answers"]) == len(a["answer_starts"]) >= 1
        text = texts[a["corpus-id"]]
        for answer, start in zip(a["answers"], a["answer_starts"], strict=True):
            assert answer and text[start : start + len(answer)] == answer, a["_id"]


def test_files_are_deterministic_json() -> None:
    for name in ("corpus.jsonl", "queries.jsonl", "answers.jsonl"):
        for line in (SAMPLE / name).read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            expected = json.dumps(record, ensure_ascii=False, sort_keys=True)
            assert line == expected
    # non-ASCII text is written as is, not escaped
    assert "Spärck" in (SAMPLE / "corpus.jsonl").read_text(encoding="utf-8")


def test_generator_reproduces_the_committed_files() -> None:
    result = subprocess.run(
        [sys.executable, str(SAMPLE / "make_sample.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr


def test_generator_rejects_an_answer_that_is_not_in_its_document() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_sample", SAMPLE / "make_sample.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["make_sample"] = module
    try:
        spec.loader.exec_module(module)
        bad = module.Query("q01", "x", "test", (("d01", 2),), ("not in the text",))
        with pytest.raises(module.SampleError, match="not in text of d01"):
            module.validate(module.DOCS, (bad,))
        ghost = module.Query("q01", "x", "test", (("d99", 2),), ("BM25",))
        with pytest.raises(module.SampleError, match="d99 does not exist"):
            module.validate(module.DOCS, (ghost,))
    finally:
        del sys.modules["make_sample"]


# --------------------------------------------------------------------------- manifests


def check_manifest(name: str, folder: Path) -> dict:
    manifest = tomllib.loads((MANIFESTS / f"{name}.toml").read_text(encoding="utf-8"))
    assert manifest["name"] == name
    assert (REPO / manifest["path"]).resolve() == folder.resolve()
    for key in ("description", "source", "licence"):
        assert manifest[key].strip()
    on_disk = sorted(
        p.relative_to(folder).as_posix()
        for p in folder.rglob("*")
        if p.is_file() and re.search(r"\.(jsonl|jsonl\.gz|tsv)$", p.name)
    )
    assert sorted(manifest["files"]) == on_disk
    digests = {}
    for rel, entry in manifest["files"].items():
        data = (folder / rel).read_bytes()
        assert entry["bytes"] == len(data), rel
        assert entry["sha256"] == hashlib.sha256(data).hexdigest(), rel
        digests[rel] = entry["sha256"]
    assert manifest["content_sha256"] == sha256_hex(digests)
    for split, entry in manifest["splits"].items():
        rows = read_qrels(folder / "qrels" / f"{split}.tsv")
        assert entry["qrels_lines"] == len(rows)
        assert entry["judged_queries"] == len({qid for qid, _, _ in rows})
        assert entry["scores"] == sorted({s for _, _, s in rows})
    return manifest


def test_sample_manifest_matches_the_files() -> None:
    manifest = check_manifest("sample", SAMPLE)
    assert manifest["licence"] == "CC BY 4.0"
    assert manifest["counts"] == {"documents": 40, "queries": 16, "answers": 16}
    assert manifest["tune_split"] == "train" and manifest["report_split"] == "test"


def test_every_collection_has_a_manifest() -> None:
    names = sorted(p.stem for p in MANIFESTS.glob("*.toml"))
    assert names == sorted((*SHARED_NAMES, "sample"))
    for name in SHARED_NAMES:
        manifest = tomllib.loads((MANIFESTS / f"{name}.toml").read_text(encoding="utf-8"))
        assert manifest["path"] == f"../shared/datasets/{name}"
        assert 0.0 < manifest["baselines"]["bm25_ndcg10_bm25s"] < 1.0


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/datasets is not on this machine")
@pytest.mark.parametrize("name", SHARED_NAMES)
def test_shared_manifest_matches_the_files(name: str) -> None:
    check_manifest(name, SHARED / name)
