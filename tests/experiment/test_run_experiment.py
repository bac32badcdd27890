"""``run_experiment``: one call from the front door for an experiment table, systems given as
modes, retrieval preferences, pipelines, saved run files, run mappings and run frames, on the
sample dataset with the hashing embedder and a real DuckDB file; the table's renderings; the
marks every table uses (:mod:`aiblox.metrics.marks`) and the pairwise tests, worked by hand."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys

import pandas as pd
import pytest

from aiblox import RetrievalPrefs, Stage, run_experiment
from aiblox.data.trec import trec_scores
from aiblox.experiment import write_trec_run
from aiblox.metrics import adjust, compare_pairwise
from aiblox.metrics.marks import delta_text, mark, p_text, value_text
from tests.conftest import REPO

METRICS = ["ndcg@10", "recall@100"]


@pytest.fixture(scope="module")
def scored(sample_dataset, tmp_path_factory):
    """bm25 and hybrid scored once, baseline bm25; their runs written as TREC files."""
    db = str(tmp_path_factory.mktemp("exp") / "sample.duckdb")
    table = run_experiment(["bm25", "hybrid"], sample_dataset, "test", METRICS, baseline=0,
                           db=db, embedder="hashing", progress=False)
    folder = tmp_path_factory.mktemp("runs")
    paths = {s.name: write_trec_run(s, folder) for s in table.systems}
    return table, db, paths


def test_one_call_scores_modes_and_tests_them_against_the_baseline(scored):
    table, _, _ = scored
    assert [s.name for s in table.systems] == ["bm25", "hybrid"]
    assert table.baseline == "bm25" and (table.test, table.correction) == ("t", "holm")
    bm25, hybrid = table.systems
    sig = table.significance["hybrid"]["ndcg@10"]
    assert sig.delta == pytest.approx(hybrid.metrics["ndcg@10"] - bm25.metrics["ndcg@10"])
    assert table.significance.get("bm25") is None  # the baseline is not tested
    assert bm25.kind == hybrid.kind == "mode" and hybrid.n_queries == 12
    # the numbers of `aiblox eval` (tests/cli/test_eval_table.py pins bm25 0.7014, hybrid 0.6177)
    assert (round(bm25.metrics["ndcg@10"], 4), round(hybrid.metrics["ndcg@10"], 4)) == (
        0.7014, 0.6177)


def test_renderings_carry_value_delta_mark_and_p(scored):
    table, _, _ = scored
    sig = table.significance["hybrid"]["ndcg@10"]
    md = table.to_markdown()
    row = next(ln for ln in md.splitlines() if ln.startswith("| hybrid |"))
    assert row.split(" | ")[1] == (f"0.6177 ({sig.delta:+.4f}"
                                   f"{'▼' if sig.significant else ''}, "
                                   f"p={sig.p_adjusted:.4f})")
    assert table._repr_markdown_() == md  # what a notebook shows
    assert "\\begin{tabular}{lrr}" in table.to_latex()
    frame = table.to_frame()
    assert list(frame["system"]) == ["bm25", "hybrid"]
    assert list(frame.columns[:3]) == ["system", "ndcg@10", "recall@100"]
    assert frame.loc[1, "ndcg@10 delta"] == sig.delta
    assert frame.loc[1, "ndcg@10 p_adjusted"] == sig.p_adjusted
    assert frame.loc[0, "ndcg@10 delta"] is None or pd.isna(frame.loc[0, "ndcg@10 delta"])
    assert frame.loc[1, "ndcg@10 mark"] == mark(sig.delta, sig.significant)


def test_saved_runs_frames_and_mappings_score_as_the_modes(scored, sample_dataset):
    table, _, paths = scored
    hybrid = table.systems[1]
    # scores as a run file carries them (ties made strictly decreasing): a frame or a mapping
    # is ordered as trec_eval orders it, by score, so tied scores would be ordered by id
    written = {q: list(zip([d for d, _ in hits], trec_scores([s for _, s in hits]), strict=True))
               for q, hits in hybrid.run.items()}
    frame = pd.DataFrame([(q, d, s) for q, hits in written.items() for d, s in hits],
                         columns=["qid", "docno", "score"])
    mapping = {q: dict(hits) for q, hits in written.items()}  # ranx / pytrec_eval form
    again = run_experiment([paths["bm25"], str(paths["hybrid"]), frame, mapping, hybrid.run],
                           sample_dataset, "test", METRICS, baseline="bm25", progress=False)
    assert [s.name for s in again.systems] == ["bm25", "hybrid", "run2", "run3", "run4"]
    assert all(s.kind == "run" for s in again.systems)
    for s in again.systems[1:]:  # a run read back, from a file, a frame or a mapping
        assert s.metrics == hybrid.metrics, s.name
        got, want = again.significance[s.name]["ndcg@10"], table.significance["hybrid"]["ndcg@10"]
        assert (got.delta, got.p, got.wins) == (want.delta, want.p, want.wins)  # 4 in a family
    assert again.systems[0].hashes["run"] == table.systems[0].hashes["run"]
    named = run_experiment([hybrid], "sample", "test", METRICS, names=["mine"], progress=False)
    assert named.systems[0].name == "mine" and named.dataset == "sample"


def test_retrieval_prefs_and_pairwise(scored, sample_dataset):
    _, db, paths = scored
    linear = RetrievalPrefs(query_text="", scoring={"blend": "linear", "normalize": "zscore"})
    table = run_experiment([linear, "dense", paths["bm25"]], sample_dataset, "test", METRICS,
                           names=["linear", "dense", "bm25"], pairwise=True, db=db,
                           embedder="hashing", progress=False)
    assert table.pairwise and table.baseline is None and table.significance == {}
    assert table.systems[0].config["prefs"]["scoring"]["blend"] == "linear"
    assert set(table.pairs) == {"linear", "dense", "bm25"}
    assert table.pairs["dense"]["bm25"]["ndcg@10"].delta == pytest.approx(
        table.systems[1].metrics["ndcg@10"] - table.systems[2].metrics["ndcg@10"])
    assert len(table.pair_rows()) == 3 * len(METRICS)  # each pair once per metric


def test_a_pair_of_equal_systems_has_no_negative_zero(scored, sample_dataset):
    """The reverse of a pair is its delta negated: 0.0 became -0.0 in the CSV (QA 21)."""
    _, db, paths = scored
    table = run_experiment(["bm25", paths["bm25"]], sample_dataset, "test", METRICS,
                           names=["mode", "file"], pairwise=True, db=db, embedder="hashing",
                           progress=False)
    deltas = [sig.delta for against in table.pairs.values() for by in against.values()
              for sig in by.values()]
    assert deltas and all(d == 0.0 and math.copysign(1.0, d) == 1.0 for d in deltas)
    assert "-0.0" not in table.to_csv()


def test_bad_arguments_fail_before_any_work(sample_dataset, tmp_path):
    cases = [
        (["bm25", "hybrid"], {"baseline": 2}, "baseline=2: there are 2 systems"),
        (["bm25", "hybrid"], {"baseline": "dense"}, "baseline 'dense' is not a system"),
        (["bm25", "bm25"], {}, "two systems are named 'bm25'"),
        (["bm25"], {"test": "z"}, "unknown test 'z'"),
        (["bm25"], {"metrics": ["ndcg@x"]}, "ndcg@x"),
        (["bm25", "hybrid"], {"baseline": 0, "pairwise": True}, "choose one"),
        (["bm25 >> nonsense"], {}, "not a mode (bm25, dense, hybrid), a run file or a pipeline"),
        ([3.5], {}, "float is not a system"),
        ([pd.DataFrame({"q": ["1"]})], {}, "a run frame needs columns qid, docno and score"),
    ]
    for systems, kwargs, message in cases:
        with pytest.raises(ValueError) as err:
            run_experiment(systems, sample_dataset, "test", db=str(tmp_path / "never.duckdb"),
                           embedder="hashing", progress=False, **kwargs)
        assert message in str(err.value), (systems, kwargs, str(err.value))
    assert not (tmp_path / "never.duckdb").exists()  # refused before a store was opened


def test_one_metric_may_be_given_as_a_string(scored, sample_dataset):
    """``metrics="ndcg@10"`` is that metric (it was read letter by letter: 'n' is not a
    metric), as ``evaluate_retrieval`` reads it."""
    table, db, _ = scored
    one = run_experiment(["bm25"], sample_dataset, "test", "ndcg@10", db=db,
                         embedder="hashing", progress=False)
    assert one.metrics == ["ndcg@10"]
    assert one.systems[0].metrics["ndcg@10"] == table.systems[0].metrics["ndcg@10"]


def test_a_pipeline_is_a_system(scored, sample_dataset):
    _, db, _ = scored
    pipeline = Stage("bm25") >> Stage("rm3") >> Stage("bm25")
    table = run_experiment(["bm25", pipeline, "bm25 >> rm3(fb_terms=5) >> bm25"],
                           sample_dataset, "test", METRICS, baseline=0, db=db,
                           embedder="hashing", progress=False)
    assert [s.kind for s in table.systems] == ["mode", "pipeline", "pipeline"]
    assert table.systems[1].name == "bm25 >> rm3 >> bm25"
    assert 0.0 < table.systems[1].metrics["ndcg@10"] <= 1.0
    # a built pipeline is named as its expression, as the CLI names one (QA 25: "fuse(bm25,
    # dense; blend='linear',...)", which does not parse)
    text = "bm25 >> rm3(fb_docs=3, fb_terms=5) >> bm25"
    built = Stage("bm25") >> Stage("rm3", fb_terms=5, fb_docs=3) >> Stage("bm25")
    again = run_experiment([built, text], sample_dataset, "test", METRICS, db=db,
                           embedder="hashing", names=[None, "typed"], progress=False)
    assert [s.name for s in again.systems] == [text, "typed"]
    assert again.systems[0].metrics == again.systems[1].metrics


def test_marks_by_hand():
    assert (mark(0.1, True), mark(-0.1, True), mark(0.1, False), mark(0.0, True)) == (
        "▲", "▼", "", "")
    assert delta_text(-0.23254, True) == "-0.2325▼" and delta_text(0.0, False) == "+0.0000"
    assert (p_text(0.48200001), p_text(0.5322), p_text(0.00004), p_text(0.00005)) == (
        "0.4820", "0.5322", "<0.0001", "0.0001")  # one precision: no 0.482 beside 0.5322
    # a p just above alpha that rounds to it is not shown as alpha beside an unmarked delta
    # (QA 21: 0.05004 printed 0.0500, as if significant at 0.05)
    assert (p_text(0.05004), p_text(0.05), p_text(0.04996), p_text(0.0501)) == (
        ">0.0500", "0.0500", "0.0500", "0.0501")
    assert (p_text(0.01003, alpha=0.01), p_text(0.01003)) == (">0.0100", "0.0100")
    assert value_text(0.7) == "0.7000"


def test_pairwise_families_by_hand():
    # three systems, four queries: c is above a and b on every query, a and b tie
    a = {"m": {"q1": 0.1, "q2": 0.2, "q3": 0.3, "q4": 0.4}}
    b = {"m": {"q1": 0.1, "q2": 0.2, "q3": 0.3, "q4": 0.4}}
    c = {"m": {"q1": 0.6, "q2": 0.8, "q3": 0.7, "q4": 0.9}}
    rows = compare_pairwise([("a", a), ("b", b), ("c", c)], ["m"])
    assert [(r.against, r.candidate) for r in rows] == [("a", "b"), ("a", "c"), ("b", "c")]
    ab, ac, bc = rows
    assert (ab.delta, ab.p_value, ab.ties) == (0.0, 1.0, 4)  # identical: no test to run
    assert ac.delta == pytest.approx(0.5) and ac.wins == 4 and ac.p_value == bc.p_value
    # one family of 3 p-values per metric, Holm: the two equal smallest times 3 and 2, made
    # monotone, and 1.0 stays 1.0
    assert [r.p_adjusted for r in rows] == pytest.approx(adjust([1.0, ac.p_value, bc.p_value]))
    assert ac.p_adjusted == pytest.approx(min(1.0, 3 * ac.p_value))


def test_the_readme_experiment_block_runs(tmp_path):
    """The README's one-call block, as written, in a fresh process from a folder of its own."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    block = text[text.index("The same experiment from Python is one call"):]
    code = re.search(r"```python\n(.*?)```", block, re.S).group(1)  # type: ignore[union-attr]
    assert "from aiblox import" in code and "run_experiment(" in code
    env = {**os.environ, "AIBLOX_DATASETS": str(REPO / "datasets"), "AIBLOX_NO_PROGRESS": "1",
           "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", code + "\nprint(frame.to_json())"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "**sample / test (12 queries)**" in done.stdout
    assert "| bm25 (baseline) | " in done.stdout and "| bm25 >> rm3 >> bm25 | " in done.stdout
    frame = json.loads(done.stdout.strip().splitlines()[-1])
    assert list(frame["system"].values()) == ["bm25", "hybrid", "bm25 >> rm3 >> bm25"]


def test_run_data_follows_the_run_file_rules_and_query_sets_must_match(scored, sample_dataset):
    """A frame or list naming a document twice was scored with both entries (and written so,
    which trec_eval refuses); a NaN score raised a bare JSON error; systems scored on other
    queries were compared on the ones they share (a delta of 0 beside different means)."""
    from aiblox.data import load_dataset
    from aiblox.experiment import system_from_run

    table, db, _ = scored
    hybrid = table.systems[1]
    q, hits = next(iter(sorted(hybrid.run.items())))
    doubled = {**hybrid.run, q: [*hits, (hits[0][0], -1.0)]}  # its best document again, last
    with pytest.warns(UserWarning, match=rf"query {q!r} lists {hits[0][0]!r} more than once; "
                                         r"the first entry, its best rank, is kept"):
        again = run_experiment([doubled], sample_dataset, "test", METRICS, progress=False)
    # a ranked list: the document at its best rank, as evaluate_run scores the same list (a
    # list scored 1.0 there and 0.5 here, QA)
    assert again.systems[0].run[q] == hits
    assert again.systems[0].metrics == hybrid.metrics
    from aiblox.metrics import evaluate_run

    assert evaluate_run(sample_dataset.qrels["test"], doubled, METRICS)[0] == \
        again.systems[0].metrics
    # rows of a frame are a run file's lines: the last row of a document is kept
    import pandas as pd

    rows = pd.DataFrame([(qq, d, s) for qq, hs in doubled.items() for d, s in hs],
                        columns=["qid", "docno", "score"])
    with pytest.warns(UserWarning, match="the last entry is kept"):
        framed = run_experiment([rows], sample_dataset, "test", METRICS, progress=False)
    assert framed.systems[0].run[q][-1] == (hits[0][0], -1.0)
    assert framed.systems[0].metrics != hybrid.metrics  # the document scored where it was kept
    nan = {**hybrid.run, q: [(hits[0][0], float("nan"))]}
    with pytest.raises(ValueError, match=rf"systems\[0\]: query {q!r}, document "
                                         rf"{hits[0][0]!r}: score nan is not a finite number"):
        run_experiment([nan], sample_dataset, "test", METRICS, progress=False)
    fewer = {k: v for k, v in hybrid.run.items() if k != q}
    half = system_from_run(sample_dataset, "test", fewer, "fewer", METRICS)
    assert len(half.per_query["ndcg@10"]) == len(hybrid.per_query["ndcg@10"])  # 0 for q
    trained = run_experiment(["bm25"], sample_dataset, "train", METRICS, db=db,
                             embedder="hashing", names=["bm25-train"], progress=False).systems[0]
    with pytest.raises(ValueError, match=r"systems 'hybrid' \(12 queries\) and 'bm25-train' "
                                         r"\(\d+ queries\) were scored on different queries"):
        run_experiment([hybrid, trained], sample_dataset, "test", METRICS, baseline=0,
                       progress=False)
    other = load_dataset(sample_dataset.source, splits=["train"])
    with pytest.raises(ValueError, match=r"has no split 'test:0/2' loaded"):
        system_from_run(other, "test:0/2", hybrid.run, "x", METRICS)


def test_a_query_that_retrieved_nothing_hashes_as_its_run_file_reads_back(tmp_path):
    """A TREC file has no line for a query that retrieved nothing: ``--save-runs`` then
    ``--run`` once gave another run hash (the empty list was hashed), the metrics equal."""
    from aiblox.data.trec import read_trec_run, trec_run_text
    from aiblox.engine.result import run_hash

    run = {"q1": [("d2", 2.0), ("d1", 1.0)], "q2": []}
    path = tmp_path / "r.trec"
    path.write_text(trec_run_text(run, "r"))
    back = read_trec_run(path)
    assert "q2" not in back
    assert run_hash(run) == run_hash(back) == run_hash({"q1": run["q1"]})


def test_a_nan_per_query_value_is_left_out_of_the_test_and_said(sample_dataset):
    """A query whose value is NaN on either side is out of that metric's test, and the table
    says how many were left out."""
    from aiblox.experiment import system_from_run
    from aiblox.experiment.table import compare_systems

    qrels = sample_dataset.qrels["test"]
    perfect = {q: [(d, 1.0) for d in sorted(docs)] for q, docs in qrels.items() if docs}
    shuffled = {q: [(d, 1.0) for d in sorted(docs, reverse=True)] + [("d40", 0.5)]
                for q, docs in qrels.items() if docs}
    a = system_from_run(sample_dataset, "test", perfect, "a", ["ndcg@10"])
    b = system_from_run(sample_dataset, "test", shuffled, "b", ["ndcg@10"])
    clean = compare_systems([a, b], sample_dataset.name, "test", ["ndcg@10"], baseline="a")
    first = sorted(b.per_query["ndcg@10"])[0]
    b.per_query["ndcg@10"][first] = float("nan")
    table = compare_systems([a, b], sample_dataset.name, "test", ["ndcg@10"], baseline="a")
    sig = table.significance["b"]["ndcg@10"]
    assert sig.dropped == 1 and clean.significance["b"]["ndcg@10"].dropped == 0
    assert "1 NaN left out" in table.detail(b, "ndcg@10")
    assert table.as_json()["systems"][1]["significance"]["ndcg@10"]["dropped"] == 1


def test_latex_escapes_a_pipelines_operators():
    """QA 25: ``bm25 >> rm3`` went into LaTeX as is; OT1 typesets ``>`` as an inverted
    question mark."""
    from aiblox.experiment.markup import tex_escape

    assert tex_escape("bm25 >> rm3(fb_terms=5) % 10") == \
        "bm25 \\textgreater{}\\textgreater{} rm3(fb\\_terms=5) \\% 10"
    assert tex_escape("a < b | c") == "a \\textless{} b \\textbar{} c"


def test_text_scores_given_as_data_follow_the_run_file_rule(scored, sample_dataset):
    """QA s8: a frame's text scores went through Python's ``float``, which took ``1_5`` as 15
    and Arabic-Indic digits, and said only ``could not convert string to float: ''``; a score
    past single precision failed later, naming no query (``trec_scores``)."""
    table, _, _ = scored
    rows = pd.DataFrame([(q, d, str(s)) for q, hits in sorted(table.systems[0].run.items())
                         for d, s in hits], columns=["qid", "docno", "score"])
    q, d = rows.loc[3, "qid"], rows.loc[3, "docno"]
    assert run_experiment([rows], sample_dataset, "test", METRICS, progress=False
                          ).systems[0].metrics == table.systems[0].metrics  # text read
    for bad, why in [("1_5", "is not a decimal number"), ("\u0661\u0662", "is not a decimal"),
                     ("", "is not a decimal number"), ("0x10", "is hexadecimal"),
                     ("1e39", "is past the largest run score 3.4028235e+38")]:
        frame = rows.copy()
        frame.loc[3, "score"] = bad
        with pytest.raises(ValueError, match=re.escape(
                f"systems[0] row 3: query {q!r}, document {d!r}: score {bad!r} {why}")):
            run_experiment([frame], sample_dataset, "test", METRICS, progress=False)
    for run in ({q: {d: "1_5"}}, {q: [(d, "")]}, {q: {d: 1e39}}):
        with pytest.raises(ValueError, match=rf"systems\[0\]: query {q!r}, document {d!r}: "
                                             rf"score .* is (not a decimal|past the largest)"):
            run_experiment([run], sample_dataset, "test", METRICS, progress=False)
