"""``benchmarks/pyterrier_side_by_side.py`` on adi, as a correctness test (no timings): PyTerrier's
``pt.Experiment`` scores aiblox's saved runs as aiblox does, and pyterrier-alpha's RRF fusion of
aiblox's bm25 and dense runs is aiblox's hybrid run once its ranks count from 1 (``k=61``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.mark.filterwarnings("ignore:.*inplace keyword")  # pandas 3, inside PyTerrier's code
def test_pyterrier_scores_and_fuses_aiblox_runs_as_aiblox_does(tmp_path):
    sys.path.insert(0, str(BENCH))
    import pyterrier_side_by_side as bench

    from tests.conftest import shared_dataset

    folder = shared_dataset("adi")
    ours, _ = bench.aiblox_eval(str(folder), tmp_path)
    assert set(ours) == set(bench.SYSTEMS)
    with bench.stdout_to_stderr():
        side = bench.pyterrier_side(folder, tmp_path)
    worst, found, total = bench.same_runs_checks(tmp_path / "runs", side, ours)
    assert total == side["queries"] == ours["bm25"]["n_queries"] == 35
    assert worst < 1e-12  # ir_measures (pytrec_eval) and aiblox agree on every mean
    assert found[61] == (total, total)  # documents, scores and order, query for query
    assert found[60][0] == 0 and found[60][1] < total  # PyTerrier's k=60 counts ranks from 0
    # PISA's BM25 is another engine (Porter2, Terrier's stop words): close, not equal
    pisa = float(side["table"].loc["bm25", "nDCG@10"])
    assert abs(pisa - ours["bm25"]["metrics"]["ndcg@10"]) < 0.05
