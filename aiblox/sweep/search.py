"""Model-based search (``[search] strategy = "tpe"``, ``"cmaes"`` or ``"gp"``): an Optuna
sampler chooses ``n`` trials one after another, each a point of the spec's grid, scored by the
spec's ``primary`` metric on the tune split (maximised), or by every one of ``[search]
objectives`` at once (a multi-objective study: quality against cost, each in its direction).

The search space is the grid itself. Every setting a point can differ in (the fusion method and
its parameters, the full-text and vector candidate depths, BM25's ``k1``, ``b``, ``method``,
``title_weight`` and ``title_b``, the dense document score and its passages, chunking, the
policy and each swept policy parameter) is one parameter. TPE asks them in that order among the
points that agree with the values chosen before it (so ``rrf_k`` is asked only of an RRF trial,
sizes only of a chunker that takes them); a numeric setting is an integer index into its sorted
values (TPE sees their order), any other a categorical. A parameter whose values among those
points are not all of its values in the grid is named apart (``name|<digest>``), so Optuna never
sees one name with two value sets.

CMA-ES and the Gaussian process model a fixed set of parameters present in every trial, so for
them every setting the grid varies is asked in every trial over all its values (``flat``): a
value the points chosen so far do not have (``w_text`` of an RRF trial) leaves that setting as
those points have it. The GP sampler sees a categorical setting as a categorical; CMA-ES, which
models numbers only, sees it as an integer index in grid order. Both need a numeric axis (CMA-ES
two varying settings), refused when the spec loads. Every trial is therefore an ordinary grid
point with its ordinary config hash and stage keys.

Seeded and resumable: the study lives in a SQLite file beside the stage cache
(:func:`study_path`), named by the spec's hash without ``n`` (:func:`study_key`), so a rerun
with the same or a larger ``n`` continues it. The sampler of the ``k``-th trial is seeded by
``(seed, k)`` and sees only the ``k`` trials completed before it (CMA-ES's own state is kept in
the study), so a study resumed after a kill asks the same trials an uninterrupted one would: the
trial a killed or interrupted run left running is scored and completed on resume (its
parameters are what the seeded sampler asked), and a study with any other unfinished trial (one
killed while its parameters were asked, or failed by an older version) is first rebuilt from its
completed trials alone, numbered ``0, 1, ...`` again (CMA-ES seeds each draw with the trial's
number, so a gap would change every later draw) (:func:`_unfinished`).
A cache at an fsspec URI (``s3://...``) keeps the study there too: the search works on a local
copy, published back (atomically) after every trial, so ``--resume`` on another machine
continues it.
Optuna is imported only here, on first use (``pip install 'aiblox[tune]'``; ``gp`` also needs
torch, the ``embeddings`` extra, and scipy).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiblox.engine.cache import StageCache, local_cache_root
from aiblox.hashing import sha256_hex
from aiblox.metrics import canonical_metrics
from aiblox.sweep.space import SearchSpace
from aiblox.sweep.spec_checks import UNHASHED

if TYPE_CHECKING:
    from aiblox.engine.settings import PipelinePoint
    from aiblox.sweep.spec import SweepSpec

__all__ = ["N_STARTUP_TRIALS", "make_sampler", "run_search", "study_key", "study_path"]


N_STARTUP_TRIALS = 10
"""Trials TPE and the GP sampler draw at random (seeded) before they model the scores (CMA-ES
starts from the middle of the space at once)."""


LATER_FIELDS = ("cv", "finetune", "pipeline", "stages", "stage_modules", "finetune_reranker",
                "seed")
"""Spec fields added after the first tpe studies: out of :func:`study_key` while unset."""


LATER_GRID_AXES: tuple[str, ...] = ("title_weight", "title_b", "fts_depth", "vector_depth",
                                     "doc_score", "passage_chunker", "passage_tokens", "stages")
"""Grid axes added after the first tpe studies: out of :func:`study_key` while unset."""


def study_key(spec: SweepSpec, context: dict[str, Any] | None = None) -> str:
    """sha256 of the spec without ``[search] n`` and of ``context`` (what else decides the
    scores: the dataset's hash, the embedder, the backend): a rerun with another ``n`` is the
    same study, a rerun on other data another one. As the spec's own hash reads it, without
    where its data and store lie and its description (:data:`~aiblox.sweep.spec_checks.
    UNHASHED`: the context names the data by its hash) and with its metrics in canonical
    order."""
    data = spec.model_dump(mode="json")
    for name in UNHASHED:
        data.pop(name, None)
    data["metrics"] = canonical_metrics(data["metrics"])
    data["search"].pop("n", None)
    for name in ("objectives", "directions"):  # unset: the key a tpe study had before them
        if data["search"].get(name) is None:
            data["search"].pop(name, None)
    for name in LATER_FIELDS:  # likewise the spec fields added after the first tpe studies
        if data.get(name) in (None, [], {}):
            data.pop(name, None)
    data.pop("device", None)  # its class is in the context's embedder id (+cuda off the CPU)
    for name in LATER_GRID_AXES:
        if data["grid"].get(name) is None:
            data["grid"].pop(name, None)
    return sha256_hex({"spec": data, "context": context or {}})


def study_path(spec: SweepSpec, cache_dir: str | Path,
               context: dict[str, Any] | None = None) -> Path | str:
    """``<cache_dir>/studies/<name>-<study key[:12]>.db``: the study's SQLite storage (a
    ``Path`` under a local cache folder, else the URI under the cache's)."""
    name = f"{spec.name}-{study_key(spec, context)[:12]}.db"
    local = local_cache_root(cache_dir)
    if local is not None:
        return local / "studies" / name
    return f"{str(cache_dir).rstrip('/')}/studies/{name}"


def _trial_seed(seed: int, k: int) -> int:
    return int(sha256_hex({"seed": seed, "trial": k})[:8], 16)


def make_sampler(strategy: str, seed: int) -> Any:
    """The Optuna sampler of one trial, seeded (:func:`_trial_seed`)."""
    import optuna

    if strategy == "tpe":
        return optuna.samplers.TPESampler(seed=seed, n_startup_trials=N_STARTUP_TRIALS)
    if strategy == "cmaes":
        return optuna.samplers.CmaEsSampler(seed=seed, warn_independent_sampling=False)
    if strategy == "gp":
        return optuna.samplers.GPSampler(seed=seed, n_startup_trials=N_STARTUP_TRIALS,
                                         deterministic_objective=True,
                                         warn_independent_sampling=False)
    raise ValueError(f"unknown search strategy {strategy!r}")


def _needs(strategy: str) -> None:
    """Import what the strategy's sampler needs, or a one-line error naming the extra."""
    wanted = {"tpe": ["optuna"], "cmaes": ["optuna", "cmaes"],
              "gp": ["optuna", "torch", "scipy"]}[strategy]
    import importlib

    for module in wanted:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            extra = "embeddings" if module == "torch" else "tune"
            raise RuntimeError(f"[search] strategy {strategy!r} needs {module}: pip install "
                               f"'aiblox[{extra}]'") from exc


def run_search(spec: SweepSpec, points: Sequence[PipelinePoint], cache_dir: str | Path,
               score: Callable[[int], float | Sequence[float]],
               context: dict[str, Any] | None = None) -> list[int]:
    """Run (or resume) the spec's study over ``points``; ``score(i)`` scores grid point ``i``
    (the caller memoises repeats): one value, or one per ``[search] objectives`` in their
    order and directions (``directions``, inferred when the spec gives none). Returns the grid
    index of every trial, in order. A trial of an earlier run is scored again (from the stage
    cache) and must score what it scored then: otherwise the study is stale and the search
    stops with its path."""
    strategy = spec.search.strategy
    _needs(strategy)
    space = SearchSpace(points, flat=strategy != "tpe", categorical_as_index=strategy == "cmaes")
    n = min(int(spec.search.n or 0), len(points))
    if n < int(spec.search.n or 0):
        warnings.warn(f"[search] n = {spec.search.n} is more than the grid's {len(points)} "
                      f"points: {n} trials are run", UserWarning, stacklevel=3)
    where = study_path(spec, cache_dir, context)
    with _local_study(cache_dir, where) as (path, publish):
        return _search(spec, points, score, space, n, path, publish, context, where)


@contextlib.contextmanager
def _local_study(cache_dir: str | Path, where: Path | str
                 ) -> Iterator[tuple[Path, Callable[[], None]]]:
    """The study's SQLite file to work on and a function that publishes it: the file itself
    under a local cache (nothing to publish); under a cache URI a local copy of the study
    there (when there is one), published back atomically."""
    if isinstance(where, Path):
        where.parent.mkdir(parents=True, exist_ok=True)
        yield where, lambda: None
        return
    cache = StageCache(cache_dir)
    file = where.rsplit("/", 1)[1]
    with tempfile.TemporaryDirectory(prefix="aiblox-study-") as tmp:
        path = Path(tmp) / file
        data = cache.read_file("studies", file)
        if data is not None:
            path.write_bytes(data)

        def publish() -> None:
            cache.write_file("studies", file, path.read_bytes())

        yield path, publish


def _search(spec: SweepSpec, points: Sequence[PipelinePoint],
            score: Callable[[int], float | Sequence[float]], space: SearchSpace, n: int,
            path: Path, publish: Callable[[], None],
            context: dict[str, Any] | None, where: Path | str) -> list[int]:
    """:func:`run_search` on the study file ``path`` (``where``: its name in messages),
    ``publish()`` after every trial told."""
    strategy = spec.search.strategy
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    key = study_key(spec, context)
    directions = [optuna.study.StudyDirection.MAXIMIZE if d == "maximize"
                  else optuna.study.StudyDirection.MINIMIZE
                  for d in spec.objective_directions().values()]
    name = f"{spec.name}-{key[:12]}-seed{spec.search.seed}"

    def open_study() -> tuple[Any, Any]:
        storage = optuna.storages.RDBStorage(f"sqlite:///{path}")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return storage, optuna.create_study(
                storage=storage, study_name=name, directions=directions, load_if_exists=True,
                sampler=make_sampler(strategy, spec.search.seed))

    storage, study = open_study()
    rebuild, pending = _unfinished(study, space)
    if rebuild:  # a gap in the numbering: rebuilt from the completed trials
        storage.engine.dispose()
        _rebuild(path, name, directions)
        publish()
        storage, study = open_study()
    try:
        return _trials(spec, study, space, n, score, pending, publish, where)
    finally:
        storage.engine.dispose()


def _trials(spec: SweepSpec, study: Any, space: SearchSpace, n: int,
            score: Callable[[int], float | Sequence[float]], pending: Any,
            publish: Callable[[], None], where: Path | str) -> list[int]:
    """The study's ``n`` trials: its completed ones scored again (and checked), then
    ``pending`` (the trial a killed run left running, :func:`_unfinished`) completed, then new
    ones asked, each told and published as it is scored."""
    import optuna
    from optuna.trial import FixedTrial, TrialState

    strategy = spec.search.strategy

    def values_of(i: int) -> list[float]:
        got = score(i)
        return [float(got)] if isinstance(got, int | float) else [float(v) for v in got]

    def tell(number: int, values: list[float]) -> None:
        study.tell(number, values if len(values) > 1 else values[0])
        publish()

    picked: list[int] = []
    for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))[:n]:
        i = space.point(FixedTrial(t.params))
        values = values_of(i)  # cached stages: reads back (and logs) a point of the earlier run
        if t.values is None or list(t.values) != values:
            raise RuntimeError(f"study {where}: trial {t.number} scored {t.values!r} then and "
                               f"{values!r} now (the code or data changed since): remove the "
                               f"file to start the search again")
        picked.append(i)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        if pending is not None and len(picked) < n:  # the trial a killed run left running
            i = space.point(FixedTrial(pending.params))
            tell(pending.number, values_of(i))
            picked.append(i)
        while len(picked) < n:
            study.sampler = make_sampler(strategy, _trial_seed(spec.search.seed, len(picked)))
            trial = study.ask()
            try:
                i = space.point(trial)
                values = values_of(i)
            except BaseException:
                publish()  # left running: the next run completes it (or drops it, unasked)
                raise
            tell(trial.number, values)
            picked.append(i)
    publish()
    return picked


def _unfinished(study: Any, space: SearchSpace) -> tuple[bool, Any]:
    """What a resumed study holds besides its completed trials: ``(False, None)`` when nothing;
    ``(False, trial)`` when only its last trial is unfinished, still running with every
    parameter asked (left by a kill or an interrupt: completing it keeps the numbering an
    uninterrupted run has); ``(True, None)`` when it must be rebuilt (:func:`_rebuild`): a
    trial killed while its parameters were asked, a failed one (older versions failed an
    interrupted trial), an unfinished trial before another."""
    from optuna.trial import FixedTrial, TrialState

    trials = study.get_trials(deepcopy=False)
    unfinished = [t for t in trials if t.state != TrialState.COMPLETE]
    if not unfinished:
        return False, None
    last = unfinished[0]
    if len(unfinished) > 1 or last.number != len(trials) - 1 or last.state != TrialState.RUNNING:
        return True, None
    try:
        space.point(FixedTrial(last.params))
    except ValueError:  # a parameter it never asked
        return True, None
    return False, last


def _rebuild(path: Path, name: str, directions: list[Any]) -> None:
    """Replace the study ``name`` in the SQLite file ``path`` by one holding only its completed
    trials (with their system attributes: CMA-ES's state), numbered from 0 without gaps, and the
    study's attributes; on a copy of the file, moved over it at the end (a kill meanwhile leaves
    the study as it was; the file's other studies are kept)."""
    import optuna
    from optuna.trial import TrialState

    storage = optuna.storages.RDBStorage(f"sqlite:///{path}")
    old = optuna.load_study(study_name=name, storage=storage)
    kept = old.get_trials(deepcopy=True, states=(TrialState.COMPLETE,))
    system = storage.get_study_system_attrs(old._study_id)
    user = old.user_attrs
    storage.engine.dispose()
    tmp = path.with_name(path.name + ".rebuild")
    shutil.copyfile(path, tmp)
    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp}")
    try:
        optuna.delete_study(study_name=name, storage=storage)
        study = optuna.create_study(storage=storage, study_name=name, directions=directions)
        study.add_trials(kept)
        for k, v in system.items():
            storage.set_study_system_attr(study._study_id, k, v)
        for k, v in user.items():
            study.set_user_attr(k, v)
    finally:
        storage.engine.dispose()
    os.replace(tmp, path)
