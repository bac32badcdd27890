"""docs/architecture.md's complete custom stage, run as written: its code block is executed as a
module, registered, used in a sweep over the sample dataset with its parameter as an axis."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"


def custom_stage_code() -> str:
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("### A complete custom stage"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_documented_custom_stage_runs_in_a_sweep(tmp_path, sweep_db, monkeypatch):
    code = custom_stage_code()
    assert 20 <= len(code.strip().splitlines()) <= 40  # "about 30 lines"
    module = types.ModuleType("doc_title_boost")
    exec(compile(code, str(DOC), "exec"), module.__dict__)
    monkeypatch.setitem(sys.modules, "doc_title_boost", module)

    from aiblox.sweep import load_spec, run_sweep

    spec = tmp_path / "spec.toml"
    spec.write_text('''
name = "custom"
dataset = "sample"
tune_split = "train"
report_split = "test"
embedder = "hashing"
metrics = ["ndcg@10"]
pipeline = "bm25 >> title_boost"
stage_modules = ["doc_title_boost"]

[base]
top_k_items = 10
fts = { top_k = 10 }

[grid.stages.title_boost]
factor = [1.0, 3.0]
''')
    result = run_sweep(load_spec(spec), cache_dir=tmp_path / "c", db=sweep_db, progress=False)
    by_factor = {p.manifest.config["pipeline"]["then"][1]["params"]["factor"]: p
                 for p in result.points}
    assert set(by_factor) == {1.0, 3.0}
    plain = run_sweep(load_spec(spec).model_copy(update={"pipeline": "bm25"}),
                      cache_dir=tmp_path / "c", db=sweep_db, progress=False).points[0]
    # factor 1 changes no score: the same metrics as bm25 alone; factor 3 reorders
    assert by_factor[1.0].metrics == plain.metrics
    names = [s["name"] for s in by_factor[3.0].manifest.splits["test"].stages]
    assert names == ["signals", "fusion", "title_boost", "metrics"]
    assert by_factor[3.0].metrics != by_factor[1.0].metrics


def test_a_stage_module_beside_the_spec_is_named_with_the_path_that_imports_it(
        tmp_path, monkeypatch):
    """The documented layout, mystages.py beside the spec, failed with a bare "No module named
    'mystages'": a command's own folder is not on Python's path. The error now names the
    folder and the PYTHONPATH that imports it, and with that path the spec loads."""
    import pytest

    from aiblox.sweep import SweepSpecError, load_spec

    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "mystages_doc.py").write_text(custom_stage_code(), encoding="utf-8")
    spec = folder / "spec.toml"
    spec.write_text('''
name = "custom"
dataset = "sample"
tune_split = "train"
report_split = "test"
embedder = "hashing"
metrics = ["ndcg@10"]
pipeline = "bm25 >> title_boost"
stage_modules = ["mystages_doc"]
''')
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "mystages_doc", raising=False)
    with pytest.raises(SweepSpecError, match=f"PYTHONPATH={re.escape(str(folder))}"):
        load_spec(spec)
    monkeypatch.syspath_prepend(str(folder))
    assert load_spec(spec).stage_modules == ["mystages_doc"]


def test_a_stage_s_run_answers_every_query_it_was_given(tmp_path, sample_dataset):
    """A researcher's stage that leaves out the queries it kept nothing for (``{qid: hits}``
    of what it found): fused first, those queries were dropped from the fused run and scored
    0, fused second they kept the other member's documents (QA). The run is taken over the
    queries the stage was given; queries it was not given are refused."""
    from pydantic import BaseModel

    from aiblox.engine import PipelineError
    from aiblox.engine.data import Run
    from aiblox.engine.evaluate import evaluate_retrieval
    from aiblox.engine.registry import register_stage
    from aiblox.engine.workspace import open_workspace

    class _NoCfg(BaseModel):
        pass

    @register_stage("t_odd_only", version="1", takes="run", gives="run", config=_NoCfg)
    def _odd_only(cfg, inputs, ctx):
        run = inputs.run
        return Run.from_dict({q: list(zip(d, s, strict=True)) for q, d, s in
                              zip(run.qids, run.docs, run.scores, strict=True)
                              if int(q[1:]) % 2})

    @register_stage("t_stranger", version="1", takes="run", gives="run", config=_NoCfg)
    def _stranger(cfg, inputs, ctx):
        return Run.from_dict({**inputs.run.as_dict(), "nobody": [("d01", 1.0)]})

    with open_workspace(sample_dataset, str(tmp_path / "s.duckdb"), "hashing",
                        progress=False) as ws:
        def run(expr):
            return evaluate_retrieval(ws, sample_dataset, "test", metrics=["ndcg@10"],
                                      pipeline=expr, progress=False)

        a, b = run("(bm25 >> t_odd_only) + dense"), run("dense + (bm25 >> t_odd_only)")
        assert a.metrics == b.metrics and a.n_queries == b.n_queries
        assert all(a.run[q] for q in a.run)  # dense finds something for every query
        alone = run("bm25 >> t_odd_only")
        assert list(alone.run) == sorted(sample_dataset.qrels["test"])  # every query kept
        assert any(not hits for hits in alone.run.values())
        with pytest.raises(PipelineError, match="stage t_stranger returned 1 query it was not "
                                                "given \\('nobody'\\)"):
            run("bm25 >> t_stranger")


def test_a_stage_s_score_that_is_not_a_number_is_refused_naming_it(tmp_path, sample_dataset):
    """It failed later, at the run hash, naming neither the stage nor where (QA)."""
    from pydantic import BaseModel

    from aiblox.engine import PipelineError
    from aiblox.engine.data import Run
    from aiblox.engine.evaluate import evaluate_retrieval
    from aiblox.engine.registry import register_stage
    from aiblox.engine.workspace import open_workspace

    class _NoCfg(BaseModel):
        pass

    @register_stage("t_nan_second", version="1", takes="run", gives="run", config=_NoCfg)
    def _nan_second(cfg, inputs, ctx):
        run = inputs.run
        return Run(run.qids, run.docs, tuple(s[:1] + (float("nan"),) + s[2:] if len(s) > 1
                                            else s for s in run.scores))

    with open_workspace(sample_dataset, str(tmp_path / "s.duckdb"), "hashing",
                        progress=False) as ws:
        first = sorted(sample_dataset.qrels["test"])[0]
        with pytest.raises(PipelineError, match=f"stage t_nan_second: query '{first}', "
                                                f"document '.*': score nan is not a finite"):
            evaluate_retrieval(ws, sample_dataset, "test", metrics=["ndcg@10"],
                               pipeline="bm25 >> t_nan_second", progress=False)
