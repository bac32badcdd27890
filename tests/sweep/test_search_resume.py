"""A model-based search interrupted anywhere (while a trial is scored, while its parameters are
asked, or failed by an older version) and resumed asks the trials an uninterrupted study asks,
for every sampler; the study is left numbered 0, 1, ... without gaps (CMA-ES seeds each draw
with the trial's number). Scores are a stand-in function of the grid index, so these run
:func:`aiblox.sweep.search.run_search` alone, in seconds."""

from __future__ import annotations

import sqlite3
import uuid
from pathlib import Path

import pytest

pytest.importorskip("optuna")

from aiblox.hashing import sha256_hex  # noqa: E402
from aiblox.sweep import SweepSpec  # noqa: E402
from aiblox.sweep.search import run_search, study_path  # noqa: E402
from aiblox.sweep.space import SearchSpace  # noqa: E402

CASES = {  # strategy, n, objectives; interrupted at the 8th score or the 20th ask
    "cmaes": ("cmaes", 16, None),
    "tpe": ("tpe", 16, None),
    "tpe-moo": ("tpe", 16, ["ndcg@10", "candidates"]),
    "gp": ("gp", 13, None),
}


def searched(sample_spec, case: str) -> SweepSpec:
    strategy, n, objectives = CASES[case]
    data = sample_spec.model_dump()
    data["search"] = {"strategy": strategy, "n": n, "seed": 3,
                      **({"objectives": objectives} if objectives else {})}
    return SweepSpec.model_validate(data)


def scorer(spec: SweepSpec):
    def score(i: int):
        quality = int(sha256_hex({"point": i})[:6], 16) / 2**24
        return (quality, float(i % 5)) if spec.search.objectives else quality
    return score


def trials(spec: SweepSpec, cache: Path) -> list[tuple[int, str]]:
    with sqlite3.connect(study_path(spec, cache)) as db:
        return db.execute("select number, state from trials order by number").fetchall()


@pytest.fixture(scope="module")
def uninterrupted(sample_spec, tmp_path_factory):
    """Each case's trials, asked without a stop."""
    done: dict[str, list[int]] = {}

    def get(case: str) -> list[int]:
        if case not in done:
            spec = searched(sample_spec, case)
            done[case] = run_search(spec, spec.grid_points(), tmp_path_factory.mktemp(case),
                                    scorer(spec))
        return done[case]
    return get


def interrupted(spec: SweepSpec, cache, at: str, k: int, monkeypatch) -> None:
    """Run the study until the ``k``-th score (``at="score"``) or parameter asked (``"ask"``)
    raises KeyboardInterrupt (Ctrl-C; a kill leaves the study file as it is then)."""
    score, calls = scorer(spec), [0]

    def counted() -> None:
        calls[0] += 1
        if calls[0] == k:
            raise KeyboardInterrupt

    def scored(i: int):
        counted()
        return score(i)

    if at == "ask":
        ask = SearchSpace._ask

        def asked(self, trial, label, values):
            counted()
            return ask(self, trial, label, values)
        monkeypatch.setattr(SearchSpace, "_ask", asked)
    with pytest.raises(KeyboardInterrupt):
        run_search(spec, spec.grid_points(), cache, scored if at == "score" else score)
    monkeypatch.undo()


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("at", ["score", "ask"])
def test_an_interrupted_study_resumes_as_if_never_stopped(case, at, sample_spec, uninterrupted,
                                                          tmp_path, monkeypatch):
    spec = searched(sample_spec, case)
    k = 12 if case == "gp" else 8  # gp: past its 10 random startup trials
    interrupted(spec, tmp_path, at, k if at == "score" else 2 * k + 3, monkeypatch)
    left = trials(spec, tmp_path)
    assert left[-1][1] == "RUNNING" and all(s == "COMPLETE" for _, s in left[:-1])
    resumed = run_search(spec, spec.grid_points(), tmp_path, scorer(spec))
    assert resumed == uninterrupted(case)
    n = spec.search.n
    assert trials(spec, tmp_path) == [(i, "COMPLETE") for i in range(n)]


@pytest.mark.parametrize("case", ["cmaes", "tpe"])
def test_a_study_an_older_version_failed_is_renumbered(case, sample_spec, uninterrupted,
                                                       tmp_path, monkeypatch):
    """Older versions told an interrupted trial FAIL: its number stayed taken."""
    import optuna
    from optuna.trial import TrialState

    spec = searched(sample_spec, case)
    interrupted(spec, tmp_path, "score", 6, monkeypatch)
    storage = f"sqlite:///{study_path(spec, tmp_path)}"
    (name,) = optuna.get_all_study_names(storage)
    old = optuna.load_study(study_name=name, storage=storage)
    old.tell(5, state=TrialState.FAIL)
    assert trials(spec, tmp_path)[-1] == (5, "FAIL")
    resumed = run_search(spec, spec.grid_points(), tmp_path, scorer(spec))
    assert resumed == uninterrupted(case)
    assert trials(spec, tmp_path) == [(i, "COMPLETE") for i in range(spec.search.n)]


def test_a_study_in_a_cache_uri_resumes_as_if_never_stopped(sample_spec, uninterrupted,
                                                            monkeypatch):
    """The trial left running and the rebuilt study are published back to the cache URI."""
    spec = searched(sample_spec, "cmaes")
    for at, k in (("score", 8), ("ask", 40)):
        uri = f"memory://aiblox-{uuid.uuid4().hex}/stages"
        interrupted(spec, uri, at, k, monkeypatch)
        assert run_search(spec, spec.grid_points(), uri, scorer(spec)) == uninterrupted("cmaes")
