"""docs/architecture.md's complete custom stage, run as written: its code block is executed as a
module, registered, used in a sweep over the sample dataset with its parameter as an axis."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

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
