"""One call for an experiment, as PyTerrier's ``pt.Experiment([...], topics, qrels,
eval_metrics, baseline=0)``: :func:`run_experiment` takes the systems however they come, scores
each on the dataset's split and returns the :class:`~aiblox.experiment.table.Experiment` table
(``to_markdown()``, ``to_latex()``, ``to_frame()``, ``to_csv()``, ``as_json()``)::

    from aiblox import Stage, run_experiment

    table = run_experiment(["bm25", "hybrid", Stage("bm25") >> Stage("rm3") >> Stage("bm25"),
                            "runs/mine.trec"], "scifact", "test", ["ndcg@10", "recall@100"],
                           baseline=0)
    print(table.to_markdown())

A system is any of:

- a retrieval mode, ``"bm25"``, ``"dense"`` or ``"hybrid"`` (the defaults of ``aiblox eval
  --mode``), or a :class:`~aiblox.contracts.RetrievalPrefs` (its settings; unset depths are the
  evaluation depth), scored by :func:`~aiblox.engine.evaluate.evaluate_retrieval`;
- a retrieval pipeline: a :class:`~aiblox.engine.Pipeline` (``Stage("bm25") >> Stage("rm3")
  >> Stage("bm25")``) or its expression (``"bm25 >> rm3 >> bm25"``), scored as a one-point run
  of the engine (:func:`~aiblox.engine.evaluate.evaluate_retrieval` with ``pipeline=``, as
  ``aiblox eval --pipeline``);
- a saved run: a TREC run file (a path; read as trec_eval reads it,
  :func:`~aiblox.data.trec.read_trec_run`), a mapping ``{qid: [(doc, score), ...]}`` (in the
  order given) or ``{qid: {doc: score}}`` (ranx, pytrec_eval; ordered as trec_eval orders
  them), a ranx ``Run``, or a run frame with columns ``qid``, ``docno``, ``score`` (PyTerrier's;
  ``query_id``, ``doc_id`` also read);
- an :class:`~aiblox.engine.result.EvalResult` or a :class:`~aiblox.experiment.table.System`
  already scored.

Every argument is checked before any work (an unknown mode, metric, test or correction, a
baseline that names no system, two systems of one name: a ``ValueError`` naming it). The
systems retrieved here share one workspace (:func:`~aiblox.engine.workspace.open_workspace`:
the dataset's own store, or ``db``, synced to the dataset first).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiblox.contracts.retrieval import RetrievalPrefs
from aiblox.data import Dataset, load_dataset
from aiblox.data.trec import check_finite_scores, read_trec_run, score_problem, trec_order
from aiblox.engine.algebra import Pipeline, PipelineError
from aiblox.engine.evaluate import check_evaluation, check_outside_sweep, evaluate_retrieval
from aiblox.engine.expression import parse_pipeline
from aiblox.engine.result import EvalResult
from aiblox.engine.settings import needs_vectors
from aiblox.experiment.table import (
    CORRECTIONS,
    TESTS,
    Correction,
    Experiment,
    System,
    Test,
    compare_systems,
    system_from_result,
    system_from_run,
)
from aiblox.metrics import DEFAULT_METRICS, validate_metrics

if TYPE_CHECKING:
    from aiblox.embedding.base import Embedder

__all__ = ["MODES", "run_experiment"]

MODES = ("bm25", "dense", "hybrid")
"""The retrieval modes a system may name."""


@dataclass(frozen=True)
class _Planned:
    """One system as given, resolved before any work: what to score and its name."""

    name: str
    prefs: RetrievalPrefs | None = None
    pipeline: Pipeline | None = None
    run: dict[str, list[tuple[str, float]]] | None = None
    source: Path | None = None
    scored: System | None = None


def run_experiment(systems: Sequence[Any], dataset: Dataset | str | Path, split: str = "test",
                   metrics: Sequence[str] = DEFAULT_METRICS, baseline: int | str | None = None,
                   test: Test = "t", correction: Correction = "holm", alpha: float = 0.05, *,
                   pairwise: bool = False, names: Sequence[str] | None = None,
                   db: str | None = None, embedder: str | Embedder = "minilm",
                   device: str | None = None, seed: int = 42,
                   progress: bool = True) -> Experiment:
    """Score ``systems`` (see the module doc) on ``dataset``'s ``split`` (a :class:`Dataset`,
    or a name, folder or ``dataset.toml`` to load) with ``metrics`` (ranx names), and compare
    them: each against ``baseline`` (its position in ``systems``, as PyTerrier's
    ``baseline=0``, or its name) or, with ``pairwise``, every pair (ranx's ``compare``), with
    the paired ``test`` (``t``, ``wilcoxon``, ``fisher``; ``seed`` for Fisher's) and the
    ``correction`` within each metric (``holm``, ``bonferroni``, ``none``) at ``alpha``.

    ``names`` labels the systems in order (default: a mode's name, a pipeline's expression, a
    run file's stem, ``run<i>`` for a run given as data). Systems retrieved here use the store
    ``db`` (None: the dataset's own) and ``embedder`` on ``device`` (as ``aiblox eval``).
    Returns the table; raises ``ValueError`` for a bad argument, before any work."""
    metrics = validate_metrics(metrics, distinct=True)  # a single name as a string too
    if test not in TESTS:
        raise ValueError(f"unknown test {test!r}; choose one of {', '.join(TESTS)}")
    if correction not in CORRECTIONS:
        raise ValueError(f"unknown correction {correction!r}; choose one of "
                         f"{', '.join(CORRECTIONS)}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be between 0 and 1, got {alpha}")
    if not systems:
        raise ValueError("no systems given: pass a list of modes, pipelines or runs")
    if names is not None and len(names) != len(systems):
        raise ValueError(f"names: {len(names)} given for {len(systems)} systems")
    plans = [_plan(s, i, names[i] if names is not None else None)
             for i, s in enumerate(systems)]
    _distinct([p.name for p in plans])
    base = _baseline(baseline, [p.name for p in plans])
    if base is not None and pairwise:
        raise ValueError(f"baseline {baseline!r} and pairwise: tests against one baseline, or "
                         f"between every pair of systems; choose one")
    if isinstance(dataset, Dataset):
        ds = dataset
        if split not in ds.qrels:
            raise ValueError(f"{ds.name} has no split {split!r}; it has "
                             f"{', '.join(sorted(ds.qrels)) or 'none'}")
    elif all(p.scored is not None for p in plans):
        ds = None  # every system already scored: nothing to load
    else:
        ds = load_dataset(dataset, splits=[split])
    name = ds.name if ds is not None else str(dataset)
    scored = _score(plans, ds, split, metrics, db=db, embedder=embedder, device=device,
                    progress=progress)
    return compare_systems(scored, name, split, metrics, baseline=base, test=test,
                           correction=correction, alpha=alpha, seed=seed, pairwise=pairwise)


def _plan(system: Any, i: int, name: str | None) -> _Planned:
    """What ``system`` (the ``i``-th) is, named; ``ValueError`` when it is none of the kinds."""
    where = f"systems[{i}]"
    if isinstance(system, System):
        return _Planned(name or system.name, scored=system)
    if isinstance(system, EvalResult):
        return _Planned(name or system.mode, scored=system_from_result(system))
    if isinstance(system, RetrievalPrefs):
        return _Planned(name or system.mode, prefs=system)
    if isinstance(system, Pipeline):
        system.check()
        return _planned_pipeline(system, name or system.expression(), where)  # as the CLI
    if isinstance(system, str) and system in MODES:
        return _Planned(name or system, prefs=RetrievalPrefs.model_validate(
            {"query_text": "", "mode": system}))
    if isinstance(system, str | Path) and Path(system).is_file():
        path = Path(system)
        return _Planned(name or path.stem, run=read_trec_run(path), source=path)
    if isinstance(system, Path):
        raise ValueError(f"{where}: no run file {system}")
    if isinstance(system, str):
        try:
            pipeline = parse_pipeline(system, where=where)
            pipeline.check()
        except PipelineError as exc:
            raise ValueError(f"{where} {system!r}: not a mode ({', '.join(MODES)}), a run file "
                             f"or a pipeline expression ({exc})") from None
        return _planned_pipeline(pipeline, name or system.strip(), where)
    run = _run_data(system, where)
    return _Planned(name or f"run{i}", run=run)


def _planned_pipeline(pipeline: Pipeline, name: str, where: str) -> _Planned:
    """A pipeline system, refused (``ValueError`` naming ``where``) where it needs what only a
    sweep gives (:func:`~aiblox.engine.evaluate.check_outside_sweep`)."""
    try:
        check_outside_sweep(pipeline)
    except PipelineError as exc:
        raise ValueError(f"{where}: {exc}") from None
    return _Planned(name, pipeline=pipeline)


def _run_data(system: Any, where: str) -> dict[str, list[tuple[str, float]]]:
    """A run given as data: a frame, a ranx ``Run`` or a mapping, as ``{qid: [(doc, score),
    ...]}`` best first; a score given as text is read as a run file's (:func:`_data_score`)."""
    columns = getattr(system, "columns", None)
    if columns is not None:  # a pandas frame
        cols = set(columns)
        qcol = next((c for c in ("qid", "query_id") if c in cols), None)
        dcol = next((c for c in ("docno", "doc_id", "docid") if c in cols), None)
        if qcol is None or dcol is None or "score" not in cols:
            raise ValueError(f"{where}: a run frame needs columns qid, docno and score "
                             f"(or query_id, doc_id, score); it has {', '.join(map(str, columns))}")
        lists: dict[str, list[tuple[str, float]]] = {}
        for row, (q, d, s) in enumerate(zip(system[qcol], system[dcol], system["score"],
                                            strict=True)):
            score = _data_score(s, f"{where} row {row}", q, d)
            lists.setdefault(str(q), []).append((str(d), score))
        return {q: trec_order(_checked_hits(hits, q, where)) for q, hits in lists.items()}
    if hasattr(system, "to_dict") and not isinstance(system, Mapping):  # a ranx Run
        system = system.to_dict()
    if not isinstance(system, Mapping):
        raise ValueError(f"{where}: {type(system).__name__} is not a system: give a mode "
                         f"({', '.join(MODES)}), a RetrievalPrefs, a Pipeline or its "
                         f"expression, a run file, a run mapping or a run frame")
    run: dict[str, list[tuple[str, float]]] = {}
    for q, hits in system.items():
        if isinstance(hits, Mapping):
            run[str(q)] = trec_order(_checked_hits(
                [(str(d), _data_score(s, where, q, d)) for d, s in hits.items()], str(q), where))
        else:  # a ranked list: a document at its first (best) rank, as evaluate_run and
            # fusion take it (a stage's or a library's list); rows of a frame are a run file's
            run[str(q)] = _checked_hits([(str(d), _data_score(s, where, q, d))
                                         for d, s in hits], str(q), where, keep="first")
    return run


def _data_score(value: Any, where: str, qid: Any, doc: Any) -> float:
    """A score given as data as a float: text by the run file's rule
    (:func:`~aiblox.data.trec.score_problem`: C's decimal syntax, as trec_eval reads it;
    Python's ``float`` took ``1_5`` as 15, Arabic-Indic digits, and said only ``could not
    convert string to float: ''`` of an empty one), a number as it is (its range is checked
    with the query's hits). ``ValueError`` naming ``where`` (``systems[i]``, and a frame's
    row: its position, from 0), the query and the document."""
    problem = score_problem(value) if isinstance(value, str) else None
    if problem is None:
        try:
            return float(value)
        except (TypeError, ValueError):
            problem = "is not a number"
    raise ValueError(f"{where}: query {str(qid)!r}, document {str(doc)!r}: score {value!r} "
                     f"{problem}")


def _checked_hits(hits: list[tuple[str, float]], qid: str, where: str,
                  keep: str = "last") -> list[tuple[str, float]]:
    """One query's hits with the run-file rules: a score that is not finite is a
    ``ValueError`` naming the query and document; a document listed twice keeps one entry,
    with a warning: its last (``keep="last"``: rows, as a run file's repeated line) or its
    first (``"first"``: a ranked list's best rank, as :func:`~aiblox.metrics.evaluate_run`
    keeps it: the same list scored the same by both)."""
    check_finite_scores(hits, qid, where)
    order = range(len(hits)) if keep == "first" else range(len(hits) - 1, -1, -1)
    kept: dict[str, int] = {}
    for i in order:
        kept.setdefault(hits[i][0], i)
    if len(kept) == len(hits):
        return hits
    twice = sorted({doc for i, (doc, _) in enumerate(hits) if kept[doc] != i})
    said = ("the first entry, its best rank, is kept (as evaluate_run and fusion keep it)"
            if keep == "first" else "the last entry is kept (as for a run file's repeated line)")
    warnings.warn(f"{where}: query {qid!r} lists {', '.join(map(repr, twice))} more than once; "
                  f"{said}", stacklevel=3)
    return [h for i, h in enumerate(hits) if kept[h[0]] == i]


def _distinct(names: list[str]) -> None:
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"two systems are named {dup[0]!r}: give each a distinct name "
                         f"(names=[...])")


def _baseline(baseline: int | str | None, names: list[str]) -> str | None:
    """The baseline's name: by position (``0``: the first system) or by name."""
    if baseline is None:
        return None
    if isinstance(baseline, int) and not isinstance(baseline, bool):
        if not -len(names) <= baseline < len(names):
            raise ValueError(f"baseline={baseline}: there are {len(names)} systems (0 to "
                             f"{len(names) - 1})")
        return names[baseline]
    if baseline not in names:
        raise ValueError(f"baseline {baseline!r} is not a system; choose one of "
                         f"{', '.join(names)} (or its position)")
    return str(baseline)


def _score(plans: list[_Planned], ds: Dataset | None, split: str, metrics: list[str], *,
           db: str | None, embedder: str | Embedder, device: str | None,
           progress: bool) -> list[System]:
    """Every planned system scored, in order; those retrieved here in one workspace."""
    retrieved = [p for p in plans if p.prefs is not None or p.pipeline is not None]
    out: dict[int, System] = {}
    if retrieved:
        from aiblox.engine.workspace import open_workspace

        assert ds is not None
        base = RetrievalPrefs(query_text="")
        pipelines = [p.pipeline for p in retrieved if p.pipeline is not None]
        vectors = any(p.prefs.mode != "bm25" for p in retrieved if p.prefs is not None) or bool(
            pipelines and needs_vectors(base, pipelines))  # none: the base's mode would say
        with open_workspace(ds, db, embedder, device=device, with_vectors=vectors,
                            progress=progress) as ws:
            for p in retrieved:  # every pipeline checked against the store before any work
                if p.pipeline is not None:
                    try:
                        check_evaluation(ws, ds, p.pipeline, base, metrics)
                    except ValueError as exc:  # PipelineError, DepthError
                        raise ValueError(f"system {p.name!r}: {exc}") from exc
            for i, p in enumerate(plans):
                if p.prefs is not None:
                    result = evaluate_retrieval(ws.retriever, ds, split, p.prefs, metrics,
                                                progress=progress)
                    out[i] = system_from_result(result, p.name)
                elif p.pipeline is not None:
                    result = evaluate_retrieval(ws, ds, split, base, metrics,
                                                pipeline=p.pipeline, progress=progress)
                    out[i] = system_from_result(result, p.name, kind="pipeline")
    for i, p in enumerate(plans):
        if p.scored is not None:
            out[i] = p.scored.model_copy(update={"name": p.name})
        elif p.run is not None:
            assert ds is not None
            out[i] = system_from_run(ds, split, p.run, p.name, metrics, source=p.source)
    return [out[i] for i in range(len(plans))]
