"""Model-based search (``[search] strategy = "tpe"``): Optuna's TPE sampler chooses ``n`` trials
one after another, each a point of the spec's grid, scored by the spec's ``primary`` metric on
the tune split (maximised).

The search space is the grid itself. Every setting a point can differ in (the fusion method and
its parameters, the candidate depth, BM25's ``k1``, ``b`` and ``method``, the dense
document score and its passages, chunking, the policy
and each swept policy parameter) is one parameter, asked in that order among the points that
agree with the values chosen before it (so ``rrf_k`` is asked only of an RRF trial, sizes only of
a chunker that takes them); a numeric setting is an integer index into its sorted values (TPE
sees their order), any other a categorical. A parameter whose values among those points are
not all of its values in the grid is named apart (``name|<digest>``), so Optuna never sees one
name with two value sets. Every trial is therefore an ordinary grid point with its ordinary
config hash and stage keys.

Seeded and resumable: the study lives in a SQLite file beside the stage cache
(:func:`study_path`), named by the spec's hash without ``n`` (:func:`study_key`), so a rerun
with the same or a larger ``n`` continues it. The sampler of the ``k``-th trial is seeded by
``(seed, k)`` and sees only the ``k`` trials completed before it, so a study resumed after a
kill asks the same trials an uninterrupted one would; a trial left running by a killed process
is marked failed (TPE ignores failed trials). Optuna is imported only here, on first use
(``pip install 'aiblox[tune]'``).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiblox.hashing import sha256_hex

if TYPE_CHECKING:
    from aiblox.eval.sweep.spec import PipelinePoint, SweepSpec

__all__ = ["N_STARTUP_TRIALS", "SearchSpace", "run_search", "study_key", "study_path"]

N_STARTUP_TRIALS = 10
"""Trials TPE draws at random (seeded) before it models the scores."""

_SCORING = ("blend", "w_text", "normalize", "missing", "rrf_k")
_FTS = ("k1", "b", "method")
_DENSE = ("doc_score", "passage_chunker", "passage_tokens")
_CHUNKING = ("chunker_id", "max_chunk_tokens", "overlap_tokens")
_DEPTH = ("top_k_chunks", "per_item_chunk_cap")


def _settings(pt: PipelinePoint) -> dict[str, Any]:
    """The settings a grid point can differ in, in the order they are asked."""
    p = pt.prefs
    out: dict[str, Any] = {k: getattr(p.scoring, k) for k in _SCORING}
    out["depth"] = p.fts.top_k
    out["vector_depth"] = p.vector.top_k
    out.update({k: getattr(p.fts, k) for k in _FTS})
    first = p.vector.doc_score == "first"  # passages play no part in "first"
    out.update({k: None if first and k != "doc_score" else getattr(p.vector, k)
                for k in _DENSE})
    out.update({k: getattr(p.chunking, k) for k in _CHUNKING})
    out.update({k: getattr(p, k) for k in _DEPTH})
    out["policy"] = pt.policy
    out.update({f"selection.{k}": v for k, v in sorted(pt.overrides.items())})
    return out


def _numeric(values: Sequence[Any]) -> bool:
    return all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)


def _choice(v: Any) -> Any:
    """A value as an Optuna categorical choice (primitives as they are, others by repr)."""
    return v if v is None or isinstance(v, str | int | float | bool) else repr(v)


class SearchSpace:
    """The grid's points as a space of parameters; :meth:`point` maps a trial to a point."""

    def __init__(self, points: Sequence[PipelinePoint]) -> None:
        self.points = list(points)
        self._settings = [_settings(p) for p in self.points]
        names: dict[str, None] = {}
        for s in self._settings:
            names.update(dict.fromkeys(s))
        self.names = list(names)
        self._all = {n: self._distinct(range(len(self.points)), n) for n in self.names}

    def _distinct(self, idx: Sequence[int], name: str) -> list[Any]:
        seen: dict[str, Any] = {}
        for i in idx:
            v = self._settings[i].get(name)
            seen.setdefault(repr(v), v)
        return list(seen.values())

    @property
    def dimensions(self) -> list[str]:
        """Settings that vary across the grid (an empty list: nothing to search)."""
        return [n for n in self.names if len(self._all[n]) > 1]

    def point(self, trial: Any) -> int:
        """The index of the grid point a trial (an Optuna ``Trial`` or ``FixedTrial``) picks."""
        idx = list(range(len(self.points)))
        for name in self.names:
            values = self._distinct(idx, name)
            if len(values) < 2:
                continue
            full = self._all[name]
            label = name if len(values) == len(full) else (
                f"{name}|{sha256_hex(sorted(repr(v) for v in values))[:8]}")
            if _numeric(values):
                ordered = sorted(values)
                chosen = ordered[trial.suggest_int(label, 0, len(ordered) - 1)]
                key = repr(chosen)
            else:
                got = trial.suggest_categorical(label, [_choice(v) for v in values])
                key = next(repr(v) for v in values if _choice(v) == got)
            idx = [i for i in idx if repr(self._settings[i].get(name)) == key]
        if len(idx) > 1:  # settings not listed above tell them apart: choose by position
            idx = [idx[trial.suggest_int("point|" + sha256_hex(idx)[:8], 0, len(idx) - 1)]]
        return idx[0]


def study_key(spec: SweepSpec, context: dict[str, Any] | None = None) -> str:
    """sha256 of the spec without ``[search] n`` and of ``context`` (what else decides the
    scores: the dataset's hash, the embedder, the backend): a rerun with another ``n`` is the
    same study, a rerun on other data another one."""
    data = spec.model_dump(mode="json")
    data["search"].pop("n", None)
    return sha256_hex({"spec": data, "context": context or {}})


def study_path(spec: SweepSpec, cache_dir: str | Path,
               context: dict[str, Any] | None = None) -> Path:
    """``<cache_dir>/studies/<name>-<study key[:12]>.db``: the study's SQLite storage."""
    return Path(cache_dir) / "studies" / f"{spec.name}-{study_key(spec, context)[:12]}.db"


def _trial_seed(seed: int, k: int) -> int:
    return int(sha256_hex({"seed": seed, "trial": k})[:8], 16)


def run_search(spec: SweepSpec, points: Sequence[PipelinePoint], cache_dir: str | Path,
               score: Callable[[int], float], context: dict[str, Any] | None = None
               ) -> list[int]:
    """Run (or resume) the spec's study over ``points``; ``score(i)`` scores grid point ``i``
    (the caller memoises repeats). Returns the grid index of every trial, in order. A trial of
    an earlier run is scored again (from the stage cache) and must score what it scored then:
    otherwise the study is stale and the search stops with its path."""
    try:
        import optuna
    except ImportError as exc:  # pragma: no cover - the extra is installed in tests
        raise RuntimeError("[search] strategy 'tpe' needs Optuna: pip install "
                           "'aiblox[tune]'") from exc
    from optuna.trial import FixedTrial, TrialState

    space = SearchSpace(points)
    n = min(int(spec.search.n or 0), len(points))
    if n < int(spec.search.n or 0):
        warnings.warn(f"[search] n = {spec.search.n} is more than the grid's {len(points)} "
                      f"points: {n} trials are run", UserWarning, stacklevel=3)
    path = study_path(spec, cache_dir, context)
    path.parent.mkdir(parents=True, exist_ok=True)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    key = study_key(spec, context)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        study = optuna.create_study(
            storage=f"sqlite:///{path}",
            study_name=f"{spec.name}-{key[:12]}-seed{spec.search.seed}",
            direction="maximize", load_if_exists=True,
            sampler=optuna.samplers.TPESampler(seed=spec.search.seed))
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING, TrialState.WAITING)):
        study.tell(t.number, state=TrialState.FAIL)  # left by a killed run
    picked: list[int] = []
    for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))[:n]:
        i = space.point(FixedTrial(t.params))
        value = score(i)  # cached stages: reads back (and logs) a point of the earlier run
        if t.value is None or value != t.value:
            raise RuntimeError(f"study {path}: trial {t.number} scored {t.value!r} then and "
                               f"{value!r} now (the code or data changed since): remove the "
                               f"file to start the search again")
        picked.append(i)
    while len(picked) < n:
        study.sampler = optuna.samplers.TPESampler(
            seed=_trial_seed(spec.search.seed, len(picked)), n_startup_trials=N_STARTUP_TRIALS)
        trial = study.ask()
        try:
            i = space.point(trial)
            value = score(i)
        except BaseException:
            study.tell(trial, state=TrialState.FAIL)
            raise
        study.tell(trial, value)
        picked.append(i)
    return picked
