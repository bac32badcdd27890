"""A TREC run file means one ranking and one set of numbers in aiblox, in trec_eval (through
``pytrec_eval``, which runs trec_eval 9's code) and in ir-measures.

Random runs (hypothesis): ties, scores equal only in single precision, documents listed twice,
judged queries with no line, queries no one judged, graded qrels with negative grades and
binary qrels; written as a TREC file and scored by aiblox's own route (``read_trec_run``, then
``evaluate_run``), by ``pytrec_eval`` and by ir-measures: equal to 1e-9 on every query for
ndcg@k, recall@k, precision@k, map@k and mrr@k, and bpref equal to trec_eval's doubles (at
relevance levels 1 and 2); and runs aiblox writes (``trec_run_text``) score
in all three as the in-memory run they were written from.

The conventions the three share, checked here: nDCG's gain is the grade itself (Järvelin and
Kekäläinen: trec_eval's ``ndcg_cut``, ranx's ``ndcg``; ranx's ``ndcg_burges`` is 2^g - 1);
grades below 1 (0 and the negative ones) are not relevant for any measure; map@k and recall@k
divide by every relevant document, precision@k by k. trec_eval has no reciprocal rank at a
cutoff: mrr@k is its ``recip_rank`` when the first relevant document lies within the first k,
else 0 (ir-measures' own ``RR@k`` comes from its msmarco provider, which breaks ties by
ascending document id, so it is compared on tie-free runs: those aiblox writes). A judged query
with no line scores 0 and every mean is over all judged queries (``trec_eval -c``).
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import ir_measures
import pytest
import pytrec_eval
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ir_measures import AP, RR, P, R, nDCG

from aiblox.data import Dataset
from aiblox.data.trec import trec_scores
from aiblox.engine.evaluate import run_hash
from aiblox.experiment.table import read_trec_run, system_from_run, trec_run_text
from aiblox.metrics import evaluate_run

KS = (1, 3, 10)
METRICS = [f"{m}@{k}" for m in ("ndcg", "recall", "precision", "map", "mrr") for k in KS]
TREC_MEASURES = {f"{m}.{','.join(map(str, KS))}" for m in ("ndcg_cut", "recall", "P", "map_cut")
                 } | {"recip_rank"}
IRM_MEASURES = [m @ k for m in (nDCG, R, P, AP) for k in KS] + [RR]
TOL = 1e-9

# ids whose byte order differs from other orders: upper case before lower, 'é' after 'z',
# prefixes ('a' < 'a9' < 'aa')
ID = st.text(alphabet="a9Zzé_", min_size=1, max_size=3)
SCORE = st.one_of(
    st.sampled_from([0.0, -0.0, 1.0, 2.5, -1.0]),  # ties
    st.sampled_from([1.0 + 1e-12, 2.5 + 2e-9, 2.5 - 2e-9]),  # ties in single precision only
    st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False))


@st.composite
def cases(draw) -> tuple[dict[str, dict[str, int]], list[tuple[str, str, int, float]]]:
    """``(qrels, lines)``: qrels of a few queries, run lines ``(qid, doc, rank, score)`` in
    file order (ranks arbitrary; a document may come twice; some judged queries absent and
    some run queries judged nowhere)."""
    docs = draw(st.lists(ID, min_size=2, max_size=10, unique=True))
    qids = draw(st.lists(st.text(alphabet="q01", min_size=1, max_size=2), min_size=1,
                         max_size=5, unique=True))
    grade = st.integers(-2, 3) if draw(st.booleans()) else st.integers(0, 1)
    # trec_eval 9 writes out of bounds (pytrec_eval crashes) for a query whose every grade is
    # below -1: its rel_levels array has max_rel + 1 entries
    qrels = {q: draw(st.dictionaries(st.sampled_from(docs), grade, min_size=1, max_size=6)
                     .filter(lambda g: max(g.values()) >= -1)) for q in qids}
    unknown = draw(st.lists(st.sampled_from(["u1", "u2", "x"]), max_size=2, unique=True))
    ran = draw(st.lists(st.sampled_from(qids + unknown), min_size=1, unique=True))
    lines = [(q, draw(st.sampled_from(docs)), draw(st.integers(-1, 20)), draw(SCORE))
             for q in ran for _ in range(draw(st.integers(1, 12)))]
    return qrels, draw(st.permutations(lines))


def write_lines(path: Path, lines: list[tuple[str, str, int, float]]) -> Path:
    path.write_text("".join(f"{q} Q0 {d} {r} {s!r} tag\n" for q, d, r, s in lines))
    return path


def trec_eval_per_query(qrels: dict, path: Path) -> dict[str, dict[str, float]]:
    """pytrec_eval on the file as its users read it: ``{qid: {doc: score}}``, line by line."""
    run: dict[str, dict[str, float]] = {}
    for line in path.read_text().splitlines():
        q, _q0, d, _r, s, _t = line.split()
        run.setdefault(q, {})[d] = float(s)
    return pytrec_eval.RelevanceEvaluator(qrels, TREC_MEASURES).evaluate(run)


def rr_at(rr: float, k: int) -> float:
    """trec_eval's reciprocal rank cut at ``k``: the first relevant document within k ranks."""
    return rr if rr > 0 and round(1 / rr) <= k else 0.0


def expected_trec(te: dict[str, float], metric: str) -> float:
    """``metric`` (aiblox's name) from trec_eval's per-query values (absent: an empty run)."""
    name, k = metric.split("@")
    if name == "mrr":
        return rr_at(te.get("recip_rank", 0.0), int(k))
    key = {"ndcg": "ndcg_cut", "recall": "recall", "precision": "P", "map": "map_cut"}[name]
    return te.get(f"{key}_{k}", 0.0)


def ir_measures_per_query(qrels: dict, path: Path) -> dict[str, dict[str, float]]:
    """ir-measures' values ``{qid: {aiblox metric: value}}`` (RR@k from RR, as above)."""
    names = {nDCG: "ndcg", R: "recall", P: "precision", AP: "map"}
    out: dict[str, dict[str, float]] = {}
    for m in ir_measures.iter_calc(IRM_MEASURES, qrels, ir_measures.read_trec_run(str(path))):
        vals = out.setdefault(m.query_id, {})
        if m.measure == RR:
            vals.update({f"mrr@{k}": rr_at(m.value, k) for k in KS})
        else:
            base = next(v for b, v in names.items() if m.measure == b @ m.measure["cutoff"])
            vals[f"{base}@{m.measure['cutoff']}"] = m.value
    return out


def assert_agree(qrels: dict, path: Path, means: dict, per_query: dict) -> None:
    """aiblox's per-query values and means equal trec_eval's and ir-measures'."""
    te = trec_eval_per_query(qrels, path)
    irm = ir_measures_per_query(qrels, path)
    for metric in METRICS:
        want = {q: expected_trec(te.get(q, {}), metric) for q in qrels}
        for q in qrels:
            got = per_query[metric][q]
            assert got == pytest.approx(want[q], abs=TOL), (metric, q, "trec_eval")
            assert got == pytest.approx(irm.get(q, {}).get(metric, 0.0), abs=TOL), \
                (metric, q, "ir-measures")
        # the mean is over every judged query, missing ones 0: trec_eval -c
        assert means[metric] == pytest.approx(sum(want.values()) / len(qrels), abs=TOL)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases())
def test_random_run_files_score_alike(tmp_path_factory, case):
    qrels, lines = case
    path = write_lines(tmp_path_factory.mktemp("run") / "run.trec", lines)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = read_trec_run(path)
    means, per_query = evaluate_run(qrels, run, METRICS)
    assert_agree(qrels, path, means, per_query)
    assert_bpref_agrees(qrels, path, run)


def assert_bpref_agrees(qrels: dict, path: Path, run: dict) -> None:
    """bpref, at relevance levels 1 and 2, is trec_eval's double for double on every query
    (negative grades unjudged; no judged non-relevant document, no relevant one)."""
    runs: dict[str, dict[str, float]] = {}
    for line in path.read_text().splitlines():
        q, _q0, d, _r, s, _t = line.split()
        runs.setdefault(q, {})[d] = float(s)
    _, per_query = evaluate_run(qrels, run, ["bpref", "bpref-l2"])
    for level, metric in ((1, "bpref"), (2, "bpref-l2")):
        te = pytrec_eval.RelevanceEvaluator(qrels, {"bpref"},
                                            relevance_level=level).evaluate(runs)
        for q in qrels:
            assert per_query[metric][q] == te.get(q, {}).get("bpref", 0.0), (metric, q)


@st.composite
def ranked_runs(draw) -> tuple[dict[str, dict[str, int]], dict[str, list[tuple[str, float]]]]:
    """``(qrels, run)``: an in-memory run as aiblox ranks one (best first, ties in any id
    order: RRF gives many), over judged and unjudged documents."""
    docs = draw(st.lists(ID, min_size=2, max_size=12, unique=True))
    qids = draw(st.lists(st.sampled_from(["1", "2", "10", "q"]), min_size=1, unique=True))
    qrels = {q: draw(st.dictionaries(st.sampled_from(docs), st.integers(-1, 3), min_size=1,
                                     max_size=5)) for q in qids}
    run = {}
    for q in draw(st.lists(st.sampled_from(qids), min_size=1, unique=True)):
        hits = draw(st.lists(st.sampled_from(docs), min_size=1, unique=True))
        scores = sorted((draw(SCORE) for _ in hits), reverse=True)
        run[q] = list(zip(hits, scores, strict=True))
    return qrels, run


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=ranked_runs())
def test_written_runs_score_as_the_run_they_came_from(tmp_path_factory, case):
    qrels, run = case
    path = tmp_path_factory.mktemp("saved") / "saved.trec"
    path.write_text(trec_run_text(run, "aiblox"))
    means, per_query = evaluate_run(qrels, run, METRICS)  # the ranking as aiblox holds it
    assert_agree(qrels, path, means, per_query)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # aiblox's own files need no rule: no warning
        back = read_trec_run(path)
    assert {q: [d for d, _ in hits] for q, hits in back.items()} == \
        {q: [d for d, _ in hits] for q, hits in run.items()}
    assert back == {q: list(zip([d for d, _ in hits], trec_scores([s for _, s in hits]),
                                strict=True)) for q, hits in run.items()}
    assert run_hash(back) == run_hash(run)
    # no ties left even in single precision: ir-measures' own RR@k (msmarco provider) agrees
    got = {(m.query_id, m.measure["cutoff"]): m.value for m in ir_measures.iter_calc(
        [RR @ k for k in KS], qrels, ir_measures.read_trec_run(str(path)))}
    for (q, k), value in got.items():
        assert per_query[f"mrr@{k}"][q] == pytest.approx(value, abs=TOL)


def test_ties_are_written_so_trec_eval_keeps_aiblox_order(tmp_path):
    # aiblox ranks ties by ascending id; trec_eval re-sorts equal scores by descending id
    qrels = {"q": {"b": 1}}
    run = {"q": [("a", 0.5), ("b", 0.5), ("c", 0.25)]}
    means, _ = evaluate_run(qrels, run, ["mrr@10"])
    assert means["mrr@10"] == 0.5
    equal = tmp_path / "equal.trec"  # the old writing: equal scores, aiblox's order
    equal.write_text("q Q0 a 1 0.5 t\nq Q0 b 2 0.5 t\nq Q0 c 3 0.25 t\n")
    assert trec_eval_per_query(qrels, equal)["q"]["recip_rank"] == 1.0  # b first there
    saved = tmp_path / "saved.trec"
    saved.write_text(trec_run_text(run, "t"))
    assert saved.read_text() == "q Q0 a 1 0.5 t\nq Q0 b 2 0.49999997 t\nq Q0 c 3 0.25 t\n"
    assert trec_eval_per_query(qrels, saved)["q"]["recip_rank"] == 0.5
    back = read_trec_run(saved)
    assert evaluate_run(qrels, back, ["mrr@10"])[0] == means and run_hash(back) == run_hash(run)
    with pytest.warns(UserWarning, match=r"rank column orders 1 query otherwise than trec_eval"):
        assert read_trec_run(equal)["q"][:2] == [("b", 0.5), ("a", 0.5)]  # trec_eval's order


def test_ties_in_single_precision_are_ties(tmp_path):
    # trec_eval 9 (pytrec_eval, ir-measures) keeps scores as 32-bit floats
    qrels = {"q": {"a": 1}}
    f = tmp_path / "near.trec"
    f.write_text(f"q Q0 a 0 {1.0 + 1e-12!r} t\nq Q0 b 0 1.0 t\n")  # ranks: no order
    with pytest.warns(UserWarning, match=r"1 query holds scores that differ only beyond single "
                                         r"precision \(e.g. query 'q': document 'b' 1.0, "
                                         r"document 'a' 1.000000000001\)"):
        run = read_trec_run(f)
    assert [d for d, _ in run["q"]] == ["b", "a"]
    assert trec_eval_per_query(qrels, f)["q"]["recip_rank"] == 0.5
    assert evaluate_run(qrels, run, ["mrr@10"])[0]["mrr@10"] == 0.5


def test_a_document_listed_twice_keeps_its_last_line(tmp_path):
    qrels = {"q": {"d": 2, "e": 1}}
    f = tmp_path / "twice.trec"
    f.write_text("q Q0 d 1 3.0 t\nq Q0 e 2 2.0 t\nq Q0 x 3 1.5 t\nq Q0 d 4 1.0 t\n")
    with pytest.warns(UserWarning) as caught:
        run = read_trec_run(f)
    assert [str(w.message) for w in caught] == [
        f"--run {f}: 1 line repeats a document already listed for its query (e.g. line 4: "
        f"query 'q', document 'd', first at line 1); each document keeps its last line, as "
        f"pytrec_eval and ir-measures read it (trec_eval itself refuses such a file)"]
    assert run == {"q": [("e", 2.0), ("x", 1.5), ("d", 1.0)]}
    means, per_query = evaluate_run(qrels, run, METRICS)
    assert_agree(qrels, f, means, per_query)
    best = evaluate_run(qrels, {"q": [("d", 3.0), ("e", 2.0), ("x", 1.5)]}, ["ndcg@10"])[0]
    assert best["ndcg@10"] - means["ndcg@10"] > 0.2  # the best line's rank would score higher


def test_a_byte_order_mark_is_not_part_of_the_first_query_id(tmp_path):
    """A run saved "UTF-8 with BOM" (Notepad, Excel's CSV export): the first line's query is
    ``q1``, not a query no one judged, and the run scores as the same file without the mark."""
    qrels = {"q1": {"d1": 1, "d3": 1}}
    lines = "q1 Q0 d1 1 1.0 t\nq1 Q0 d2 2 0.5 t\n"
    plain, marked = tmp_path / "plain.trec", tmp_path / "bom.trec"
    plain.write_text(lines, encoding="utf-8")
    marked.write_text(lines, encoding="utf-8-sig")
    assert marked.read_bytes().startswith(b"\xef\xbb\xbf")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "query no one judged" warning
        run = read_trec_run(marked)
    assert run == read_trec_run(plain) == {"q1": [("d1", 1.0), ("d2", 0.5)]}
    assert evaluate_run(qrels, run, ["map"])[0]["map"] == 0.5


def test_unknown_and_missing_queries_are_warned_and_scored_as_trec_eval_c(tmp_path):
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"c": 2, "a": 0}}
    ds = Dataset(name="toy", path=tmp_path, corpus={},
                 queries={"q1": "x", "q2": "y", "q3": "z", "q4": "never judged"},
                 qrels={"test": qrels})
    f = tmp_path / "r.trec"
    f.write_text("q1 Q0 a 1 2.0 t\nq3 Q0 a 1 2.0 t\nq3 Q0 c 2 1.0 t\nq4 Q0 a 1 1.0 t\n"
                 "zz Q0 a 1 1.0 t\n")
    run = read_trec_run(f)
    with pytest.warns(UserWarning) as caught:
        system = system_from_run(ds, "test", run, "r", METRICS, source=f)
    assert [str(w.message) for w in caught] == [
        f"--run {f}: 2 queries of the run's 4 are ignored, as trec_eval ignores them: 1 no "
        f"query of toy (e.g. 'zz'); 1 not judged in test (e.g. 'q4')",
        f"--run {f}: 1 judged query of toy/test has no line in the run (e.g. 'q2'); scored 0, "
        f"every mean over all 3 judged queries, as trec_eval -c and ir-measures (plain "
        f"trec_eval averages over the 2 the run holds)"]
    assert system.n_queries == 3 and system.per_query["ndcg@10"]["q2"] == 0.0
    assert_agree(qrels, f, system.metrics, system.per_query)


def test_graded_gain_is_linear_and_low_grades_are_not_relevant(tmp_path):
    # trec_eval's ndcg_cut and ranx's ndcg: gain = grade; ranx's ndcg_burges: 2^grade - 1
    qrels = {"q": {"a": 1, "b": 3, "n": -1, "z": 0}}
    run = {"q": [("n", 4.0), ("a", 3.0), ("z", 2.0), ("b", 1.0)]}
    f = tmp_path / "g.trec"
    f.write_text(trec_run_text(run, "t"))
    te = trec_eval_per_query(qrels, f)["q"]
    got = evaluate_run(qrels, run, ["ndcg@10", "ndcg_burges@10", "precision@3", "mrr@10"])[0]
    ideal = 3 + 1 / math.log2(3)
    assert got["ndcg@10"] == pytest.approx((1 / math.log2(3) + 3 / math.log2(5)) / ideal)
    assert got["ndcg@10"] == pytest.approx(te["ndcg_cut_10"], abs=TOL)
    assert got["ndcg_burges@10"] != pytest.approx(te["ndcg_cut_10"], abs=1e-3)
    assert got["precision@3"] == pytest.approx(te["P_3"]) == pytest.approx(1 / 3)
    assert got["mrr@10"] == te["recip_rank"] == 0.5  # the -1 and 0 grades are not relevant


def test_saved_run_of_a_mode_scores_alike_in_trec_eval(tmp_path, sample_dataset, sample_store):
    """What ``aiblox eval sample --mode hybrid --save-runs DIR`` writes, scored by pytrec_eval
    and ir-measures: aiblox's numbers on every query."""
    from aiblox.contracts.retrieval import RetrievalPrefs
    from aiblox.engine.evaluate import evaluate_retrieval
    from aiblox.experiment.table import system_from_result, write_trec_run
    from aiblox.retrieval import HybridRetriever

    store, emb = sample_store
    prefs = RetrievalPrefs(query_text="", mode="hybrid", top_k_items=100)
    result = evaluate_retrieval(HybridRetriever(store, emb), sample_dataset, "test", prefs,
                                METRICS, progress=False)
    path = write_trec_run(system_from_result(result), tmp_path)
    written = [float(line.split()[4]) for line in path.read_text().splitlines()]
    held = [s for q in sorted(result.run) for _, s in result.run[q]]
    assert sum(w != s for w, s in zip(written, held, strict=True)) > 0  # RRF ties were written
    qrels = sample_dataset.qrels["test"]
    assert_agree(qrels, path, result.metrics, result.per_query)
    assert run_hash(read_trec_run(path)) == result.hashes["run"]


@pytest.mark.parametrize("score,value", [("1", 1.0), ("-1.5", -1.5), ("+.5", 0.5), ("2.", 2.0),
                                         ("1e3", 1000.0), ("1E-3", 0.001), ("007", 7.0),
                                         ("-0", 0.0), ("1.5e+2", 150.0)])
def test_a_score_in_c_s_decimal_syntax_is_read(tmp_path, score, value):
    f = tmp_path / "run.trec"
    f.write_text(f"q Q0 d 1 {score} t\n", encoding="utf-8")
    assert read_trec_run(f) == {"q": [("d", value)]}


@pytest.mark.parametrize("score,said", [
    ("1_5", "is not a decimal number"),  # float() read 15, strtod 1
    ("\u0661\u0662", "is not a decimal number"),  # Arabic-Indic 12: float() read 12
    ("\uff11\uff12", "is not a decimal number"),  # full-width 12
    ("1e", "is not a decimal number"), (".", "is not a decimal number"),
    ("1,5", "is not a decimal number"), ("1.5f", "is not a decimal number"),
    ("0x10", "is hexadecimal: write it as a decimal number"),
    ("-0X1p3", "is hexadecimal"),
    ("nan", "is not a finite number"), ("-Infinity", "is not a finite number"),
    ("1e999", "is not a finite number")])
def test_any_other_score_is_refused_naming_file_line_and_field(tmp_path, score, said):
    """QA: scores were read with Python's ``float``: ``1_5`` as 15 (trec_eval's ``strtod``
    reads 1), Arabic-Indic and full-width digits taken."""
    from aiblox.data.trec import RunFileError

    f = tmp_path / "run.trec"
    f.write_text(f"q Q0 a 1 2.0 t\nq Q0 d 2 {score} t\n", encoding="utf-8")
    with pytest.raises(RunFileError) as err:
        read_trec_run(f)
    assert str(err.value).startswith(f"--run {f}:2: score {score!r} {said}"), str(err.value)


@pytest.mark.parametrize("rank", ["1_0", "\u0661", "1.0", "one"])
def test_a_rank_is_ascii_digits(tmp_path, rank):
    from aiblox.data.trec import RunFileError

    f = tmp_path / "run.trec"
    f.write_text(f"q Q0 d {rank} 1.0 t\n", encoding="utf-8")
    with pytest.raises(RunFileError, match=rf":1: rank {rank!r} is not an integer$"):
        read_trec_run(f)
    f.write_text("q Q0 d -3 1.0 t\nq Q0 e +4 0.5 t\n", encoding="utf-8")
    assert read_trec_run(f) == {"q": [("d", 1.0), ("e", 0.5)]}
