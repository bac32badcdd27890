"""aiblox beside PyTerrier on the shared collections: one experiment as each tool's user writes
it, in one run, and the two tools checked against each other on the same runs.

For each collection's test split:

- **aiblox**, through the command a user types, in a process of its own timed whole (start,
  ingest into a fresh DuckDB file with the shared MiniLM vectors, retrieval, scoring):
  ``aiblox eval NAME --mode bm25 --mode dense --mode hybrid --metric ndcg@10 --metric
  recall@100 --metric map@100 --save-runs DIR --json``;
- **PyTerrier** (``python-terrier``, ``pyterrier-pisa``, ``pyterrier-alpha``: Terrier's own
  indexer needs its jars from Maven, which this machine cannot reach; PISA's engine ships in its
  wheel) as its user writes it: a PISA index of title + text with PISA's defaults, BM25 (k1
  1.2, b 0.75), and its top 100 fused with aiblox's saved dense run by
  ``pyterrier_alpha.RRFusion`` (a PyTerrier user's hybrid from a dense run file), scored by
  ``pt.Experiment`` (nDCG@10, R@100, AP@100);
- **checks on the same runs**: ``pt.Experiment`` scores aiblox's three saved run files (the
  largest difference to aiblox's own values), and ``pyterrier_alpha.RRFusion(k=60)`` fuses
  aiblox's saved bm25 and dense runs, against aiblox's hybrid run: the same documents at the
  same RRF scores (the hybrid run file's own scores), and the same order (equal scores may be
  ordered differently: aiblox by document id, PyTerrier as pandas sorts).

    python benchmarks/pyterrier_side_by_side.py --markdown    # cranfield, scifact, medline
    python benchmarks/pyterrier_side_by_side.py --datasets adi --markdown
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

from _common import arg_parser, environment_line, err, print_table

# pandas 3's deprecations of the ``inplace`` keyword, raised inside PyTerrier's own code
warnings.filterwarnings("ignore", message=".*inplace keyword", module=r"pyterrier")
warnings.filterwarnings("ignore", message=".*inplace keyword", module=r"pyterrier_alpha")

ROOT = Path(__file__).resolve().parents[1]
METRICS = {"ndcg@10": "nDCG@10", "recall@100": "R@100", "map@100": "AP@100"}
"""aiblox's metric names and ir_measures' (what pt.Experiment reports) for the same measure."""
SYSTEMS = ("bm25", "dense", "hybrid")


def aiblox_eval(name: str, work: Path) -> tuple[dict[str, dict], float]:
    """``aiblox eval`` as a user runs it, in its own process: each system's JSON record by
    name, and the command's wall seconds. Its run files go to ``work/runs``."""
    cmd = [sys.executable, "-m", "aiblox.cli", "eval", name, "--db", str(work / "a.duckdb"),
           "--mode", "bm25", "--mode", "dense", "--mode", "hybrid",
           *(a for m in METRICS for a in ("--metric", m)),
           "--save-runs", str(work / "runs"), "--json"]
    t0 = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=False,
                         env={**os.environ, "AIBLOX_NO_PROGRESS": "1"})
    wall = time.perf_counter() - t0
    if out.returncode != 0:
        raise SystemExit(f"aiblox eval {name} failed:\n{out.stderr}")
    return {s["name"]: s for s in json.loads(out.stdout)["systems"]}, wall


def beir_frames(folder: Path) -> tuple[list[dict], object, object]:
    """The corpus (docno, text: title + text), topics (judged test queries) and qrels of a BEIR
    folder, as a PyTerrier user reads them."""
    import pandas as pd

    docs = []
    plain = folder / "corpus.jsonl"
    with (open(plain, encoding="utf-8") if plain.exists()
          else gzip.open(folder / "corpus.jsonl.gz", "rt", encoding="utf-8")) as f:
        for line in f:
            d = json.loads(line)
            docs.append({"docno": str(d["_id"]),
                         "text": f"{d.get('title') or ''} {d.get('text') or ''}".strip()})
    qrels = pd.read_csv(folder / "qrels" / "test.tsv", sep="\t", dtype=str)
    qrels = pd.DataFrame({"qid": qrels.iloc[:, 0], "docno": qrels.iloc[:, 1],
                          "label": qrels.iloc[:, 2].astype(int)})
    judged = set(qrels.qid)
    with open(folder / "queries.jsonl", encoding="utf-8") as f:
        queries = [json.loads(line) for line in f]
    # PyTerrier's query parsers read operators in punctuation: its users strip it
    topics = pd.DataFrame([{"qid": str(q["_id"]), "query": re.sub(r"[^\w\s]", " ", q["text"])}
                           for q in queries if str(q["_id"]) in judged])
    return docs, topics, qrels


@contextlib.contextmanager
def stdout_to_stderr():  # type: ignore[no-untyped-def]
    """PISA's engine logs to file descriptor 1: sent to stderr, so stdout holds the tables."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def pyterrier_side(folder: Path, work: Path) -> dict[str, object]:
    """PISA's BM25, and its top 100 fused by RRF with aiblox's dense run (``work/runs``),
    through ``pt.Experiment``: means, index and experiment seconds."""
    import pyterrier as pt
    import pyterrier_alpha as pta
    from pyterrier.measures import AP, R, nDCG
    from pyterrier_pisa import PisaIndex

    docs, topics, qrels = beir_frames(folder)
    t0 = time.perf_counter()
    index = PisaIndex(str(work / "pisa"), text_field="text", overwrite=True)
    index.index(iter(docs))
    index_s = time.perf_counter() - t0
    bm25 = index.bm25(k1=1.2, b=0.75, num_results=1000)
    t1 = time.perf_counter()
    bm25(topics)  # retrieval alone, for its queries per second
    bm25_s = time.perf_counter() - t1
    t1 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dense = pt.Transformer.from_df(pt.io.read_results(str(work / "runs" / "dense.trec"),
                                                          topics=topics))
        table = pt.Experiment([bm25, pta.RRFusion(bm25 % 100, dense, k=61) % 100], topics,
                              qrels, eval_metrics=[nDCG @ 10, R @ 100, AP @ 100],
                              names=["bm25", "hybrid"])
    exp_s = time.perf_counter() - t1
    return {"table": table.set_index("name"), "index_s": index_s, "experiment_s": exp_s,
            "bm25_s": bm25_s,
            "queries": len(topics), "stemmer": index.stemmer, "stops": index.stops,
            "topics": topics, "qrels": qrels}


def same_runs_checks(runs: Path, side: dict[str, object], ours: dict[str, dict]
                     ) -> tuple[float, dict[int, tuple[int, int]], int]:
    """The largest |difference| between pt.Experiment on aiblox's run files and aiblox's own
    means; and, for RRFusion's ``k`` of 60 and 61, the queries where it fuses aiblox's bm25 and
    dense runs into aiblox's hybrid run (RRF k 60): the same documents at the same scores (the
    hybrid run file's own scores), and the same ranked list; and the number of queries.

    aiblox writes a run's tied scores strictly decreasing in single precision (so trec_eval
    reads its order: :func:`aiblox.data.trec.trec_scores`), so PyTerrier's fused scores, in the
    hybrid run's order, are written the same way before they are compared with the file's."""
    import pyterrier as pt
    import pyterrier_alpha as pta
    from pyterrier.measures import AP, R, nDCG

    from aiblox.data.trec import trec_scores

    topics, qrels = side["topics"], side["qrels"]
    frames = {s: pt.model.add_ranks(pt.io.read_results(str(runs / f"{s}.trec"), topics=topics))
              for s in SYSTEMS}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = pt.Experiment([frames[s] for s in SYSTEMS], topics, qrels,
                              eval_metrics=[nDCG @ 10, R @ 100, AP @ 100],
                              names=list(SYSTEMS)).set_index("name")
    worst = max(abs(float(table.loc[s, theirs]) - ours[s]["metrics"][m])
                for s in SYSTEMS for m, theirs in METRICS.items())
    hybrid = frames["hybrid"]
    found: dict[int, tuple[int, int]] = {}
    total = 0
    for k in (60, 61):
        fused = pta.RRFusion(pt.Transformer.from_df(frames["bm25"]),
                             pt.Transformer.from_df(frames["dense"]), k=k)(topics)
        same_scores = same_order = total = 0
        for qid, theirs in fused.groupby("qid"):  # same_order: the same ranked list
            mine = hybrid[hybrid.qid == qid].sort_values("rank")
            ours_docs = list(mine.docno)
            theirs = theirs.sort_values("rank")
            theirs_docs = list(theirs.docno)[:len(ours_docs)]
            score = dict(zip(theirs.docno, theirs.score, strict=True))
            total += 1
            if sorted(ours_docs) == sorted(theirs_docs):  # then every document has a score
                want = trec_scores([float(score[d]) for d in ours_docs])
                same_scores += all(abs(float(got) - w) <= 1e-12 * max(1.0, abs(w))
                                   for got, w in zip(mine.score, want, strict=True))
            same_order += ours_docs == theirs_docs
        found[k] = (same_scores, same_order)
    return worst, found, total


def main(argv: list[str] | None = None) -> int:
    p = arg_parser(__doc__)
    p.add_argument("--datasets", default="cranfield,scifact,medline",
                   help="comma-separated shared collections (test split)")
    p.add_argument("--markdown", action="store_true", help="print GitHub markdown tables")
    args = p.parse_args(argv)
    from aiblox.data.find import find_dataset

    rows, checks, notes = [], [], []
    for name in [d.strip() for d in args.datasets.split(",") if d.strip()]:
        with tempfile.TemporaryDirectory(prefix=f"pt-{name}-") as tmp:
            work = Path(tmp)
            err.print(f"{name}: aiblox eval (a fresh store, then again) ...")
            _, first_wall = aiblox_eval(name, work)
            ours, wall = aiblox_eval(name, work)  # warm: the store and its indexes exist
            err.print(f"{name}: PyTerrier (PISA) ...")
            with stdout_to_stderr():
                side = pyterrier_side(find_dataset(name), work)
            worst, found, total = same_runs_checks(work / "runs", side, ours)
        n = side["queries"]
        for s in SYSTEMS:
            m = ours[s]["metrics"]
            rows.append([name, f"aiblox `{s}`", str(n),
                         *(f"{m[k]:.4f}" for k in METRICS),
                         f"{ours[s]['timings'].get('qps', 0):,.0f}", ""])
        table = side["table"]
        for s, label in (("bm25", "PyTerrier: PISA `bm25`"),
                         ("hybrid", "PyTerrier: `RRFusion(bm25 % 100, dense run, k=61) % 100`")):
            rows.append([name, label, str(n),
                         *(f"{float(table.loc[s, k]):.4f}" for k in METRICS.values()),
                         f"{n / side['bm25_s']:,.0f}" if s == "bm25" else "", ""])
        rows[-2][-1] = (f"PyTerrier: index {side['index_s']:.1f} s, pt.Experiment "
                        f"{side['experiment_s']:.1f} s; aiblox eval: {first_wall:.1f} s on a "
                        f"fresh store (ingest, indexes), {wall:.1f} s again")
        checks.append([name, f"{worst:.1e}", f"{found[61][0]}/{total}",
                       f"{found[61][1]}/{total}", f"{found[60][1]}/{total}"])
        notes.append(f"{name}: PISA stemmer {side['stemmer']}, stop words {side['stops']}")
    print_table("aiblox beside PyTerrier, test splits", [
        "dataset", "system", "queries", "nDCG@10", "R@100", "AP@100 (map@100)", "q/s", "cost"],
        rows, args.markdown, right=["queries", "nDCG@10", "R@100", "AP@100 (map@100)", "q/s"],
        notes=[*notes, "q/s: aiblox's retrieval of the system in the second `aiblox eval` "
               "(its JSON timings: indexes built, query vectors cached); PISA's BM25 over the "
               "topics alone (`bm25(topics)`)",
               environment_line()])
    print_table("the same runs through both tools", [
        "dataset", "max |pt.Experiment - aiblox| (3 runs x 3 metrics)",
        "RRFusion(k=61) = aiblox hybrid, RRF k 60: documents and scores", "ranked lists",
        "RRFusion(k=60): ranked lists"], checks, args.markdown,
        notes=["RRFusion scores 1 / (k + rank) with PyTerrier's ranks from 0: its k = 61 is "
               "Cormack et al.'s (and aiblox's) k = 60 with ranks from 1",
               "ranked lists: queries whose top 100 is the same list; with equal scores a list "
               "can differ only in how documents of equal RRF score are ordered"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
