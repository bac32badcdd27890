"""Write ``datasets/manifests/<name>.toml`` for every known collection.

A manifest records what a collection is (name, description, source, licence), where it
is expected (a path relative to the repository root), what it holds (documents,
queries, answers, judged queries and qrels lines per split), the sha256 and size of
every data file, one ``content_sha256`` over them all (the dataset hash a run logs), and
the baseline numbers published for it. Counts and hashes are
computed from the files themselves; the descriptive fields and baselines are held
below, transcribed from ``../shared/datasets/README.md``.

Usage, from anywhere::

    python datasets/make_manifests.py            # (re)write the manifests
    python datasets/make_manifests.py --check    # exit 1 if a manifest is stale

A collection whose folder is missing (no ``../shared/datasets`` on this machine) is
skipped with a message, and its manifest is left as it is. Counts are also checked
against the numbers the shared README states; a mismatch is an error. Standard library
only; the TOML is written by hand, in a fixed order, so the output is deterministic.
Compressed files (``corpus.jsonl.gz``) are hashed as stored bytes.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

DATASETS_DIR = Path(__file__).resolve().parent
REPO_ROOT = DATASETS_DIR.parent
MANIFEST_DIR = DATASETS_DIR / "manifests"
SHARED_REL = "../shared/datasets"
SCHEMA_VERSION = 1

BM25S_SETUP = (
    "bm25s 0.3.16, Snowball stemmer, English stop words, title + text, k1=1.2, b=0.75; "
    "nDCG@10 on the test split. A correct BM25 with the same analysis lands within "
    "about 0.01 of these."
)


@dataclass(frozen=True)
class Collection:
    name: str
    description: str
    source: str
    licence: str
    path: str
    """Folder relative to the repository root."""
    expected: dict[str, int] = field(default_factory=dict)
    """Counts the source README states: documents, queries, <split>_judged, <split>_lines."""
    baselines: dict[str, float] = field(default_factory=dict)
    baseline_notes: str = ""
    notes: tuple[str, ...] = ()
    tune_split: str | None = None
    report_split: str = "test"


COLLECTIONS: tuple[Collection, ...] = (
    Collection(
        name="adi",
        description="ADI: short abstracts on documentation and information retrieval, "
        "with binary judgments; tiny, good for fast tests.",
        source="Glasgow IR test collection (adi.tar.gz)",
        licence="none stated",
        path=f"{SHARED_REL}/adi",
        expected={"documents": 82, "test_judged": 35, "test_lines": 170},
        baselines={"bm25_ndcg10_bm25s": 0.4832},
        baseline_notes=BM25S_SETUP,
        notes=("Binary judgments; queries without judgments are left out of qrels.",),
    ),
    Collection(
        name="cisi",
        description="CISI: articles on information science, with binary judgments.",
        source="Glasgow IR test collection (cisi.tar.gz)",
        licence="none stated",
        path=f"{SHARED_REL}/cisi",
        expected={"documents": 1460, "test_judged": 76, "test_lines": 3114},
        baselines={"bm25_ndcg10_bm25s": 0.3814},
        baseline_notes=BM25S_SETUP,
        notes=("Binary judgments; queries without judgments are left out of qrels.",),
    ),
    Collection(
        name="cranfield",
        description="Cranfield II: aeronautics abstracts and questions with graded judgments.",
        source="Glasgow IR test collection (cran.tar.gz, md5 1730f7be572d95a5a4b56c59a7b900a5)",
        licence="none stated",
        path=f"{SHARED_REL}/cranfield",
        expected={"documents": 1400, "test_judged": 225, "test_lines": 1612},
        baselines={"bm25_ndcg10_bm25s": 0.3695},
        baseline_notes=BM25S_SETUP,
        notes=(
            "Query ids are the positions 1..225 in cran.qry, as the qrels count them.",
            "score = 5 - Cleverdon's code (a complete answer is 4); lines with code -1 dropped.",
            "Docs 471 and 995 have empty text.",
        ),
    ),
    Collection(
        name="medline",
        description="MEDLINE: medical abstracts with binary judgments.",
        source="Glasgow IR test collection (med.tar.gz, MED.REL)",
        licence="none stated",
        path=f"{SHARED_REL}/medline",
        expected={"documents": 1033, "test_judged": 30, "test_lines": 696},
        baselines={"bm25_ndcg10_bm25s": 0.6986},
        baseline_notes=BM25S_SETUP,
        notes=("Binary judgments; queries without judgments are left out of qrels.",),
    ),
    Collection(
        name="sample",
        description="The aiblox sample: 40 short documents on six topics around "
        "information retrieval (14 of them markdown with headings), 16 queries with "
        "graded judgments and SQuAD-style answer spans; used by aiblox quickstart and "
        "fast tests.",
        source="Written for aiblox; generated by datasets/sample/make_sample.py",
        licence="CC BY 4.0",
        path="datasets/sample",
        expected={
            "documents": 40,
            "queries": 16,
            "test_judged": 12,
            "test_lines": 26,
            "train_judged": 4,
            "train_lines": 8,
        },
        notes=(
            "Scores: 2 = highly relevant, 1 = partly relevant.",
            "answers.jsonl gives, per query, answer strings and their character offsets "
            "in the text of one gold document.",
        ),
        tune_split="train",
    ),
    Collection(
        name="scifact",
        description="SciFact: scientific claims as queries against biomedical paper "
        "abstracts; the standard BEIR copy.",
        source="BEIR SciFact (allenai/scifact; BEIR files)",
        licence="claims CC BY 4.0; abstracts ODC-By 1.0",
        path=f"{SHARED_REL}/scifact",
        expected={
            "documents": 5183,
            "test_judged": 300,
            "test_lines": 339,
            "train_judged": 809,
            "train_lines": 919,
        },
        baselines={
            "bm25_ndcg10_bm25s": 0.6791,
            "bm25_ndcg10_beir_paper": 0.665,
            "bm25_ndcg10_anserini_flat": 0.679,
            "bm25_ndcg10_lucene_variants_min": 0.676,
            "bm25_ndcg10_lucene_variants_max": 0.690,
            "dense_ndcg10_all_minilm_l6_v2_mteb": 0.645,
            "hybrid_ndcg10_reported_min": 0.686,
            "hybrid_ndcg10_reported_max": 0.713,
        },
        baseline_notes=BM25S_SETUP + " The other numbers are published nDCG@10 on test: "
        "BM25 in the BEIR paper and Anserini (flat), Lucene/Elasticsearch BM25 variants, "
        "all-MiniLM-L6-v2 dense (MTEB), BM25 + dense fusion as reported.",
        notes=("Train and test queries do not overlap: tune on train, report on test.",),
        tune_split="train",
    ),
    Collection(
        name="squad-v1.1-dev",
        description="SQuAD v1.1 dev as passage retrieval: the distinct context paragraphs "
        "are the corpus, every question has exactly one gold paragraph, and "
        "answers.jsonl gives the answer spans.",
        source="SQuAD v1.1 dev (dev-v1.1.json, md5 3e85deb501d4e538b6bc56f786231552)",
        licence="CC BY-SA 4.0",
        path=f"{SHARED_REL}/squad-v1.1-dev",
        expected={
            "documents": 2067,
            "queries": 10570,
            "test_judged": 10570,
            "test_lines": 10570,
        },
        baselines={"bm25_ndcg10_bm25s": 0.8733},
        baseline_notes=BM25S_SETUP,
        notes=(
            "_id = <article>_<paragraph>, title = article title.",
            "answers.jsonl: {_id, corpus-id, answers, answer_starts}; all 34,726 offsets "
            "verified by the provider.",
        ),
    ),
    Collection(
        name="vaswani",
        description="NPL / Vaswani: physics abstracts with short queries.",
        source="NPL / Vaswani collection (as used in PyTerrier's tests)",
        licence="none stated",
        path=f"{SHARED_REL}/vaswani",
        expected={"documents": 11429, "test_judged": 93, "test_lines": 2083},
        baselines={
            "bm25_ndcg10_bm25s": 0.4362,
            "bm25_map1000_bm25s": 0.2870,
            "bm25_map_pyterrier": 0.2965,
        },
        baseline_notes=BM25S_SETUP + " MAP: bm25s MAP@1000, and the BM25 MAP PyTerrier reports.",
    ),
)


class ManifestError(ValueError):
    """A collection's files are malformed or disagree with the stated counts."""


# ----------------------------------------------------------------------------- reading


def _open_text(path: Path):
    if path.name.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8", newline="")
    return path.open("r", encoding="utf-8", newline="")


def _count_jsonl(path: Path) -> int:
    """Number of JSON objects with an ``_id``; blank lines are ignored."""
    ids: set[str] = set()
    with _open_text(path) as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ManifestError(f"{path}:{lineno}: not JSON ({exc.msg})") from exc
            if not isinstance(record, dict) or "_id" not in record:
                raise ManifestError(f"{path}:{lineno}: missing field '_id'")
            if record["_id"] in ids:
                raise ManifestError(f"{path}:{lineno}: duplicate _id {record['_id']!r}")
            ids.add(record["_id"])
    return len(ids)


def _read_qrels(path: Path) -> dict[str, object]:
    judged: set[str] = set()
    scores: set[int] = set()
    lines = 0
    with path.open("r", encoding="utf-8", newline="") as fh:
        header = fh.readline().rstrip("\r\n")
        if header.split("\t") != ["query-id", "corpus-id", "score"]:
            raise ManifestError(f"{path}:1: header is {header!r}, want query-id/corpus-id/score")
        for lineno, line in enumerate(fh, start=2):
            if not line.strip():
                continue
            parts = line.rstrip("\r\n").split("\t")
            if len(parts) != 3:
                raise ManifestError(f"{path}:{lineno}: want 3 tab-separated fields")
            try:
                scores.add(int(parts[2]))
            except ValueError as exc:
                raise ManifestError(f"{path}:{lineno}: score {parts[2]!r} is not an int") from exc
            judged.add(parts[0])
            lines += 1
    return {"judged_queries": len(judged), "qrels_lines": lines, "scores": sorted(scores)}


def _file_digest(path: Path) -> tuple[int, str]:
    h = hashlib.sha256()
    size = 0
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
            size += len(block)
    return size, h.hexdigest()


def data_files(folder: Path) -> list[str]:
    """The data files of a BEIR-layout folder, as sorted POSIX paths relative to it."""
    names = []
    for rel in ("corpus.jsonl", "corpus.jsonl.gz", "queries.jsonl", "answers.jsonl"):
        if (folder / rel).is_file():
            names.append(rel)
    names += [f"qrels/{p.name}" for p in (folder / "qrels").glob("*.tsv") if p.is_file()]
    return sorted(names)


@dataclass(frozen=True)
class Description:
    """What the files of one collection hold."""

    counts: dict[str, int]
    splits: dict[str, dict[str, object]]
    files: dict[str, tuple[int, str]]
    """relative path -> (bytes, sha256 hex)"""


def describe(coll: Collection, folder: Path) -> Description:
    """Counts, splits and file digests of one collection folder."""
    files = data_files(folder)
    corpora = [f for f in files if f.startswith("corpus.")]
    if len(corpora) != 1:
        raise ManifestError(f"{folder}: want exactly one corpus.jsonl[.gz], found {corpora}")
    if "queries.jsonl" not in files:
        raise ManifestError(f"{folder}: queries.jsonl is missing")
    counts: dict[str, int] = {
        "documents": _count_jsonl(folder / corpora[0]),
        "queries": _count_jsonl(folder / "queries.jsonl"),
    }
    if "answers.jsonl" in files:
        counts["answers"] = _count_jsonl(folder / "answers.jsonl")
    splits = {Path(f).stem: _read_qrels(folder / f) for f in files if f.startswith("qrels/")}
    if not splits:
        raise ManifestError(f"{folder}: no qrels/<split>.tsv")
    for key, want in sorted(coll.expected.items()):
        if key in counts:
            got = counts[key]
        else:
            split, _, what = key.rpartition("_")
            field_name = {"judged": "judged_queries", "lines": "qrels_lines"}[what]
            got = splits[split][field_name] if split in splits else None
        if got != want:
            raise ManifestError(f"{coll.name}: {key} is {got}, the README states {want}")
    digests = {f: _file_digest(folder / f) for f in files}
    return Description(counts=counts, splits=splits, files=digests)


def content_sha256(files: dict[str, tuple[int, str]]) -> str:
    """One hash for the whole collection: sha256 of the canonical JSON of {path: sha256}.

    Equal to ``aiblox.hashing.sha256_hex({path: sha256, ...})`` (sorted keys, compact
    separators, UTF-8), written out here so that this script needs only the stdlib.
    """
    mapping = {rel: digest for rel, (_, digest) in files.items()}
    text = json.dumps(mapping, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# ----------------------------------------------------------------------------- writing

_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def _key(key: str) -> str:
    return key if _BARE_KEY.match(key) else _string(key)


def _string(value: str) -> str:
    out = []
    for ch in value:
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} as TOML")


def render(coll: Collection, info: Description) -> str:
    """The manifest text of one collection."""
    lines = [
        f"# Manifest of the {coll.name} collection. Written by datasets/make_manifests.py",
        "# from the files themselves: edit the script and rerun it, not this file.",
        f"schema_version = {SCHEMA_VERSION}",
        f"name = {_string(coll.name)}",
        f"description = {_string(coll.description)}",
        f"source = {_string(coll.source)}",
        f"licence = {_string(coll.licence)}",
        f"path = {_string(coll.path)}",
        'layout = "beir"',
        f"content_sha256 = {_string(content_sha256(info.files))}",
        f"report_split = {_string(coll.report_split)}",
    ]
    if coll.tune_split:
        lines.append(f"tune_split = {_string(coll.tune_split)}")
    if coll.notes:
        lines.append("notes = [")
        lines += [f"    {_string(n)}," for n in coll.notes]
        lines.append("]")
    if coll.baseline_notes:
        lines.append(f"baseline_notes = {_string(coll.baseline_notes)}")
    lines += ["", "[counts]"]
    lines += [f"{_key(k)} = {_value(v)}" for k, v in info.counts.items()]
    for split in sorted(info.splits):
        lines += ["", f"[splits.{_key(split)}]"]
        lines += [f"{_key(k)} = {_value(v)}" for k, v in info.splits[split].items()]
    for rel in sorted(info.files):
        size, digest = info.files[rel]
        lines += ["", f"[files.{_key(rel)}]", f"bytes = {size}", f"sha256 = {_string(digest)}"]
    if coll.baselines:
        lines += ["", "[baselines]"]
        lines += [f"{_key(k)} = {_value(float(v))}" for k, v in coll.baselines.items()]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only compare with disk")
    parser.add_argument(
        "--only", action="append", default=[], metavar="NAME", help="limit to these names"
    )
    args = parser.parse_args(argv)
    known = {c.name for c in COLLECTIONS}
    unknown = sorted(set(args.only) - known)
    if unknown:
        print(f"make_manifests.py: unknown collection(s): {', '.join(unknown)}", file=sys.stderr)
        return 2
    stale: list[str] = []
    for coll in COLLECTIONS:
        if args.only and coll.name not in args.only:
            continue
        folder = (REPO_ROOT / coll.path).resolve()
        if not folder.is_dir():
            print(f"skip {coll.name}: {folder} not found")
            continue
        try:
            text = render(coll, describe(coll, folder))
        except ManifestError as exc:
            print(f"make_manifests.py: {exc}", file=sys.stderr)
            return 1
        target = MANIFEST_DIR / f"{coll.name}.toml"
        data = text.encode("utf-8")
        if args.check:
            if not target.is_file() or target.read_bytes() != data:
                stale.append(coll.name)
            else:
                print(f"ok {coll.name}")
            continue
        MANIFEST_DIR.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        print(f"wrote {target.relative_to(REPO_ROOT)}")
    if stale:
        print(f"make_manifests.py: stale manifest(s): {', '.join(stale)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
