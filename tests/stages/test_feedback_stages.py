"""RM3 and Bo1 as stages on the sample dataset: equal to the plain-Python references
(``prf_reference``) for every query and several settings, refused before any work where they
cannot work, and swept end to end (parameters as axes, cached, verified from the manifest)."""

from __future__ import annotations

import pytest

from aiblox.contracts import FtsConfig
from aiblox.engine.data import Queries, Run
from aiblox.engine.plan import StageInputs
from aiblox.engine.retrieval import StageContext
from aiblox.engine.stages.bo1 import Bo1Config, bo1
from aiblox.engine.stages.rm3 import Rm3Config, rm3
from aiblox.text.analysis import Analyzer
from tests.stages.prf_reference import bo1_reference, rm3_reference


@pytest.fixture(scope="module")
def sample(sweep_db, sample_dataset):
    from aiblox.engine.workspace import open_workspace

    ws = open_workspace(sample_dataset, db=sweep_db, embedder="hashing", with_vectors=False,
                        progress=False)
    pairs = [*sample_dataset.split_queries("train"), *sample_dataset.split_queries("test")]
    queries = Queries.of(pairs)
    index = ws.indexes.lexical(FtsConfig())
    run = Run.from_lists(queries.qids, index.search(list(queries.texts), 20))
    analyzer = Analyzer()
    docs = {}
    for it in sample_dataset.corpus.values():  # counted here, not read from the index
        counts: dict[str, float] = {}
        for t in analyzer.terms(f"{it.title or ''} {it.text or ''}".strip()):
            counts[t] = counts.get(t, 0.0) + 1.0
        docs[it.id] = counts
    yield StageContext(ws), queries, run, docs, analyzer
    ws.store.close()


@pytest.mark.parametrize("params", [
    {},
    {"fb_docs": 3, "fb_terms": 25, "orig_weight": 0.2, "max_df": 1.0, "english_terms": False},
    {"fb_docs": 20, "fb_terms": 5, "orig_weight": 0.8, "max_df": 0.3},
])
def test_rm3_equals_the_reference_on_every_sample_query(sample, params):
    ctx, queries, run, docs, analyzer = sample
    cfg = Rm3Config(**params)
    out = rm3(cfg, StageInputs(queries, queries, run), ctx)
    expanded = 0
    for q, text, terms, hits in zip(queries.qids, queries.texts, out.terms,
                                    run.as_dict().values(), strict=True):
        expect = rm3_reference(analyzer.terms(text), hits, docs, fb_docs=cfg.fb_docs,
                               fb_terms=cfg.fb_terms, orig_weight=cfg.orig_weight,
                               max_df=cfg.max_df, english_terms=cfg.english_terms)
        got = dict(terms)
        assert sorted(got) == sorted(expect), q
        assert got == pytest.approx(expect, rel=1e-12), q
        expanded += len(got) > len(set(analyzer.terms(text)))
    assert expanded >= len(queries) // 2  # feedback added terms to most queries


@pytest.mark.parametrize("params", [
    {},
    {"fb_docs": 5, "fb_terms": 20, "beta": 0.4},
    {"fb_docs": 10, "fb_terms": 3, "min_docs": 3},
])
def test_bo1_equals_the_reference_on_every_sample_query(sample, params):
    ctx, queries, run, docs, analyzer = sample
    cfg = Bo1Config(**params)
    out = bo1(cfg, StageInputs(queries, queries, run), ctx)
    for q, text, terms, hits in zip(queries.qids, queries.texts, out.terms,
                                    run.as_dict().values(), strict=True):
        expect = bo1_reference(analyzer.terms(text), [d for d, _ in hits], docs,
                               fb_docs=cfg.fb_docs, fb_terms=cfg.fb_terms,
                               min_docs=cfg.min_docs, beta=cfg.beta)
        got = dict(terms)
        assert sorted(got) == sorted(expect), q
        assert got == pytest.approx(expect, rel=1e-12), q


def test_feedback_after_feedback_starts_from_the_weighted_terms(sample):
    """A second rm3 interpolates with the first one's weighted terms (L1-normalised)."""
    ctx, queries, run, _, _ = sample
    cfg = Rm3Config(fb_docs=5, orig_weight=1.0)
    once = rm3(cfg.model_copy(update={"orig_weight": 0.5}), StageInputs(queries, queries, run),
               ctx)
    again = rm3(cfg, StageInputs(queries, once, run), ctx)  # orig_weight 1: the input back
    for a, b in zip(once.terms, again.terms, strict=True):
        total = sum(w for _, w in a)
        assert dict(b) == pytest.approx({t: w / total for t, w in a}, rel=1e-12)


HEAD = """
name = "prf"
dataset = "sample"
tune_split = "train"
report_split = "test"
embedder = "hashing"
metrics = ["ndcg@10", "recall@10"]
"""


def spec_of(tmp_path, text):
    from aiblox.sweep import load_spec

    path = tmp_path / "spec.toml"
    path.write_text(HEAD + text)
    return load_spec(path)


@pytest.mark.parametrize("pipeline, stages, message", [
    ("bm25 >> rm3(fb_docs=50) >> bm25", "", "stage rm3: fb_docs = 50 but the store holds 40 "
                                            "documents"),
    ("bm25 >> rm3 >> bm25", "[grid.stages.rm3]\nfb_terms = [10, 100000]\n",
     r"stage rm3: fb_terms = 100000 but the index's vocabulary holds \d+ terms"),
])
def test_settings_that_cannot_work_are_refused_before_any_work(tmp_path, sweep_db, pipeline,
                                                              stages, message):
    """What the store decides (its size, its vocabulary) is refused when the sweep starts;
    what the depths decide, when the spec loads (below)."""
    from aiblox.engine import PipelineError
    from aiblox.sweep import run_sweep

    spec = spec_of(tmp_path, f'pipeline = "{pipeline}"\n[base]\nmode = "bm25"\n'
                             f'fts = {{ top_k = 100 }}\n{stages}')
    with pytest.raises(PipelineError, match=message) as err:
        run_sweep(spec, cache_dir=tmp_path / "c", db=sweep_db, progress=False)
    assert "\n" not in str(err.value)
    assert not (tmp_path / "c" / "signals").exists()  # nothing computed


def test_feedback_from_more_documents_than_its_input_holds_is_refused_when_the_spec_loads(
        tmp_path):
    from aiblox.sweep import SweepSpecError

    with pytest.raises(SweepSpecError, match=r":\d+: field 'pipeline': bm25 % 5 >> "
                                             r"bo1\(fb_docs=8\) >> bm25: stage bo1: fb_docs = "
                                             r"8 but its input run holds at most 5 documents "
                                             r"per query$"):
        spec_of(tmp_path, 'pipeline = "bm25 % 5 >> bo1(fb_docs=8) >> bm25"\n[base]\n'
                          'mode = "bm25"\nfts = { top_k = 100 }\n')


def test_a_feedback_sweep_end_to_end(tmp_path, sweep_db):
    """The pipeline axis and rm3's axes: each point planned and cached, the bm25 after rm3
    searching its terms, a re-run computing nothing, the rm3 point verified from its
    manifest."""
    from aiblox.sweep import run_sweep
    from aiblox.sweep.verify import verify_point

    spec = spec_of(tmp_path, """pipeline = ["bm25", "bm25 >> rm3 >> bm25", "bm25 >> bo1 >> bm25"]

[base]
mode = "bm25"
top_k_items = 20
fts = { top_k = 20 }

[grid.stages.rm3]
fb_terms = [5, 20]

[baseline]
pipeline = "bm25"
""")
    first = run_sweep(spec, cache_dir=tmp_path / "c", db=sweep_db, progress=False)
    assert len(first.points) == 4
    by = {p.label.split(" @ ")[0]: p for p in first.points}
    assert set(by) == {"bm25", "bm25 >> rm3(fb_terms=5) >> bm25",
                       "bm25 >> rm3(fb_terms=20) >> bm25", "bm25 >> bo1 >> bm25"}
    names = [s["name"] for s in by["bm25 >> bo1 >> bm25"].manifest.splits["test"].stages]
    assert names == ["signals", "fusion", "bo1", "bm25", "metrics"]
    # feedback changes the ranking, and the two rm3 settings differ from each other
    metrics = {k: p.metrics["train"]["ndcg@10"] for k, p in by.items()}
    runs = {k: p.manifest.splits["train"].run_hash for k, p in by.items()}
    assert len(set(runs.values())) == 4, metrics
    again = run_sweep(spec, cache_dir=tmp_path / "c", db=sweep_db, progress=False)
    assert again.computed == {} and {"rm3", "bo1", "bm25"} <= set(again.reused)
    assert first.computed["rm3"] == 4 and first.computed["bo1"] == 2  # per point and split
    assert [p.metrics for p in again.points] == [p.metrics for p in first.points]
    report = verify_point(by["bm25 >> rm3(fb_terms=20) >> bm25"].manifest, db=sweep_db)
    assert report.identical, report.first_difference
    assert {"train/rm3", "test/rm3", "train/bm25", "test/bm25"} <= {c.where for c in
                                                                   report.checks}


def test_feedback_reads_the_analysis_of_the_bm25_after_it(sample, sample_dataset):
    """``bm25(stemmer=None) >> rm3 >> bm25(stemmer=None)`` expanded the base's stemmed terms,
    which the unstemmed index mostly lacks (cranfield nDCG@10 0.26 for 0.37, no warning): rm3
    and bo1 now read the analysis of the bm25 after them, as if it were written on them; what
    they set themselves stays theirs."""
    from aiblox.engine import PipelineError
    from aiblox.engine.evaluate import evaluate_retrieval

    ws = sample[0].workspace

    def run(expr):
        res = evaluate_retrieval(ws, sample_dataset, "test", metrics=["ndcg@10"],
                                 pipeline=expr, progress=False)
        return res.hashes["run"], res.run

    plain = 'bm25(stemmer=None, stopwords="none")'
    for fb in ("rm3(fb_docs=3, fb_terms=20)", "bo1(fb_docs=3, fb_terms=20)"):
        kind = fb.split("(")[0]
        told = fb.replace("fb_docs", 'fts={"stemmer": None, "stopwords": "none"}, fb_docs')
        inherited = run(f"{plain} >> {fb} >> {plain}")
        assert inherited == run(f"{plain} >> {told} >> {plain}"), kind
        # told its own analysis, it keeps it: the stemmed index's feedback, searched unstemmed
        stemmed = fb.replace("fb_docs", 'fts={"stemmer": "english", "stopwords": "en"}, fb_docs')
        assert run(f"{plain} >> {stemmed} >> {plain}")[0] != inherited[0], kind
        assert run(f"bm25 >> {fb} >> bm25") == run(f"bm25 >> {stemmed} >> bm25"), kind
    with pytest.raises(PipelineError, match=r"stage rm3: the bm25 stages after it analyse text "
                                            r"differently \(bm25: stemmer = 'english', "
                                            r"bm25\(stemmer=None\): stemmer = None\)"):
        run("bm25 >> rm3 >> (bm25 + bm25(stemmer=None))")
    both = run('bm25 >> rm3(fts={"stemmer": None}) >> (bm25 + bm25(stemmer=None))')
    assert both[1] and both[0] != run("bm25 >> rm3 >> (bm25 + bm25)")[0]
