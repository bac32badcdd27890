"""Pipeline sweeps: fusion, then late chunking, selection, prompt, reader and validation, every
stage memoised by its key, so a point recomputes only the stages its settings change.

A spec with ``[grid.chunking]`` or ``[grid.selection]`` is run here (``run_sweep`` dispatches).
Stages per point and split, in order, each keyed by sha256 of name, version, config and input
keys (:func:`~aiblox.eval.sweep.stages.stage_key`):

======================  ==========================================================  ==============
stage                   config                                                      inputs
======================  ==========================================================  ==============
``signals``             as in a fusion sweep, plus ``limit`` (``query_limit``)      (none)
``fusion``              scoring, ``top_k_items`` (:func:`~.runner.fused_run`)       signals
``metrics``             ranx metrics of the fused run                               fusion
``chunks``              chunker id (parameters included), strategy,                 fusion
                        ``top_k_chunks``, ``per_item_chunk_cap``, late-chunking
                        weights and embedder
``chunk_metrics``       metrics, ``chunk_k``, answer match rule, projection         chunks
``selection``           policy id, version, sha256 of the effective policy,         chunks
                        overrides, index version, embedder
``prompt``              prompt contract version and template sha256                 selection
``reader``              reader name, its options, model name                        prompt
``validation``          validator version                                           prompt, reader
``answer_metrics``      metric names and the match rule                             chunks, prompt,
                                                                                    validation
======================  ==========================================================  ==============

So changing a selection parameter recomputes selection and what follows, nothing before it;
changing a chunker recomputes chunks and what follows; the answer stages run only when the spec
has selection axes. Metrics stages store ``{"means", "per_query"}`` like a fusion sweep's.

Only the first ``query_limit`` queries of each split are scored (sorted ids). Points run one after
another (chunk embedding dominates and is shared through the chunk cache); ``jobs`` sets the
numba threads of ranx's metrics, as in a fusion sweep. The store and the embedder are opened
only when a chunks or signals entry is missing.
The point is chosen on the tune split by ``primary`` (a ranx metric, a chunk metric such as
``answer_recall@5``, or an answer metric such as ``answer_f1``), with the bootstrap interval and
the significance tests against the baseline of a fusion sweep.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from tqdm.auto import tqdm

from aiblox.assembly import PROMPT_CONTRACT_VERSION, TEMPLATE_SHA256, get_llm
from aiblox.chunking.metrics import ANSWER_MATCH_RULE, PROJECTION
from aiblox.chunking.registry import make_chunker
from aiblox.compiled import compiled_threads
from aiblox.contracts.retrieval import RetrievalPrefs
from aiblox.eval.chunk_eval import gold_answers
from aiblox.eval.datasets import Dataset, load_dataset
from aiblox.eval.metrics import STATUSES, QrelsScorer, chunk_metrics, unpack_metrics
from aiblox.eval.metrics.significance import Comparison, bootstrap_ci, compare_to_baseline
from aiblox.eval.runner import config_hash
from aiblox.eval.sweep import pipeline_stages as st
from aiblox.eval.sweep.manifest import PointManifest, SplitManifest, environment
from aiblox.eval.sweep.runner import (
    DEFAULT_CACHE_DIR,
    FUSION_VERSION,
    METRICS_VERSION,
    SIGNALS_VERSION,
    PointResult,
    SweepResult,
    _Pipeline,
    _signals_output,
    choose_best,
    fused_run,
    fusion_config,
    metrics_config,
    point_done,
    point_label,
    signals_config,
)
from aiblox.eval.sweep.spec import PipelinePoint, SweepSpec, backend_of, load_policy_by_name
from aiblox.eval.sweep.stages import StageCache, StageRecord, stage_key
from aiblox.eval.sweep.tracking import release_on_error
from aiblox.hashing import sha256_hex
from aiblox.retrieval.late_chunking import LateChunker, default_chunk_cache

__all__ = [
    "ANSWER_METRICS_VERSION",
    "CHUNKS_VERSION",
    "CHUNK_METRICS_VERSION",
    "PROMPT_VERSION",
    "READER_VERSION",
    "SELECTION_VERSION",
    "VALIDATION_VERSION",
    "chunk_label",
    "logged_per_query",
    "pipeline_config",
    "run_pipeline_sweep",
    "selected_evidence",
]

CHUNKS_VERSION = "1"
CHUNK_METRICS_VERSION = "1"
SELECTION_VERSION = "1"
PROMPT_VERSION = "1"
READER_VERSION = "1"
VALIDATION_VERSION = "1"
ANSWER_METRICS_VERSION = "1"

PER_QUERY_STAGES = ("metrics", "chunk_metrics", "answer_metrics")
"""Stages whose output is ``{"means", "per_query"}``."""
FUSION_AXES = ("blend", "w_text", "rrf_k", "normalize", "missing", "depth")
"""Grid axes over fusion (a pipeline sweep that sets none keeps the base fusion)."""


def chunk_label(prefs: RetrievalPrefs) -> str:
    """``sentences-m128-o16-k10-c3``: chunker, sizes (when set), top_k_chunks, per-item cap."""
    c = prefs.chunking
    sizes = "".join(f"-{tag}{v}" for tag, v in (("m", c.max_chunk_tokens),
                                                  ("o", c.overlap_tokens)) if v is not None)
    return f"{c.chunker_id}{sizes}-k{prefs.top_k_chunks}-c{prefs.per_item_chunk_cap}"


def _selection_label(pt: PipelinePoint) -> str:
    if pt.policy is None:
        return ""
    return "|" + pt.policy + "".join(f"-{k}={v!r}" for k, v in pt.overrides.items())


def pipeline_config(spec: SweepSpec, pt: PipelinePoint, embedder_id: str | None,
                    backend: str) -> tuple[str, dict[str, Any]]:
    """The point's effective config and its hash: retrieval prefs (fusion and chunking),
    embedder, backend, ``query_limit``, and with selection the policy (id, sha256 of the
    effective policy, the effective value of each swept parameter) and the reader."""
    _, config = config_hash(pt.prefs, embedder_id, backend)
    config = {**config, "query_limit": spec.query_limit, "chunk_k": list(spec.chunk_k)}
    if pt.policy is not None:
        policy = _policy(pt)
        swept = set(spec.grid.selection.override_names()) if spec.grid.selection else set()
        config["selection"] = {
            "policy": pt.policy, "policy_sha256": policy.sha256(),
            # the effective value of every swept parameter (an override equal to the policy's
            # own value is the same point as no override)
            "params": {k: getattr(policy, k) for k in sorted(swept | set(pt.overrides))}}
        config["reader"] = {"name": spec.reader, "options": dict(spec.reader_options)}
    return sha256_hex(config), config


def _policy(pt: PipelinePoint) -> Any:
    return load_policy_by_name(str(pt.policy)).with_updates(**pt.overrides)


def logged_per_query(cache: StageCache, stages: Sequence[dict[str, Any]]
                     ) -> dict[str, dict[str, float]]:
    """``{metric: {qid: value}}`` of every stage of one split's records whose output has
    per-query values (:data:`PER_QUERY_STAGES`: ranx of the fused run, chunk metrics, answer
    metrics), read from the stage cache; for MLflow's ``per_query.<split>.parquet``."""
    out: dict[str, dict[str, float]] = {}
    for rec in stages:
        if rec["name"] in PER_QUERY_STAGES:
            output = cache.load(rec["name"], rec["key"])
            if rec["name"] == "metrics":  # ranx's, stored as arrays
                output = unpack_metrics(output)
            out.update(output["per_query"])
    return out


def selected_evidence(cache: StageCache, stages: Sequence[dict[str, Any]]
                      ) -> list[dict[str, Any]] | None:
    """Rows ``query_id, rank, chunk_id, item_id`` of the evidence the selection stage kept, in
    order per query (a query that kept nothing is one row with rank -1 and no chunk); None when
    the records have no selection stage. For MLflow's ``evidence.<split>.parquet``."""
    sel = next((rec for rec in stages if rec["name"] == "selection"), None)
    if sel is None:
        return None
    rows: list[dict[str, Any]] = []
    for qid, q in sorted(cache.load("selection", sel["key"])["queries"].items()):
        chosen = q["bundle"]["selected_evidence"]
        rows += [{"query_id": qid, "rank": i, "chunk_id": ev["chunk_id"],
                  "item_id": ev["knowledge_id"]} for i, ev in enumerate(chosen)]
        if not chosen:
            rows.append({"query_id": qid, "rank": -1, "chunk_id": None, "item_id": None})
    return rows


def _late_params(embedder_id: str | None) -> dict[str, Any]:
    """What decides chunk scores besides the prefs (the default late chunker's weights)."""
    return {**LateChunker(None).params, "embedder": embedder_id}


class _Sweep:
    """One pipeline sweep's state: the stage cache, outputs already loaded (by key), and the
    store, embedder and late chunker opened on first need."""

    def __init__(self, spec: SweepSpec, ds: Dataset, cache: StageCache, opener: _Pipeline,
                 backend: str, embedder_id: str | None, progress: bool) -> None:
        self.spec, self.ds, self.cache, self.opener = spec, ds, cache, opener
        self.backend, self.embedder_id, self.progress = backend, embedder_id, progress
        self.splits = [spec.tune_split, spec.report_split]
        self.outputs: dict[tuple[str, str], tuple[StageRecord, Any]] = {}
        self.scorers: dict[tuple[str, tuple[str, ...]], QrelsScorer] = {}
        self._late: LateChunker | None = None
        self.index_version = ds.hash[:16]
        self.signals_s = 0.0

    # -- plumbing ------------------------------------------------------------------------------
    def stage(self, name: str, version: str, config: Any, inputs: Sequence[str],
              compute: Callable[[], Any], codec: Literal["json", "arrays"] = "json"
              ) -> tuple[StageRecord, Any]:
        """A memoised stage, loaded once per sweep (the cache counts one use per key)."""
        key = stage_key(name, version, config, inputs)
        if (name, key) not in self.outputs:
            self.outputs[(name, key)] = self.cache.run(name, version, config, inputs, compute,
                                                       codec=codec)
        return self.outputs[(name, key)]

    @property
    def late(self) -> LateChunker:
        if self._late is None:
            retriever = self.opener.get_retriever()
            self._late = LateChunker(retriever.embedder, default_chunk_cache(self.opener.open()))
        return self._late

    def scorer(self, split: str, qids: Sequence[str]) -> QrelsScorer:
        """ranx over the split's qrels of the scored queries only (a query left out by
        ``query_limit`` must not count as a miss)."""
        key = (split, tuple(qids))
        if key not in self.scorers:
            qrels = self.ds.qrels[split]
            self.scorers[key] = QrelsScorer({q: qrels[q] for q in qids if q in qrels})
        return self.scorers[key]

    def gold(self, qids: Sequence[str]) -> tuple[dict[str, Any], dict[str, list[str]]]:
        """Gold answer spans and texts of ``qids`` (empty without ``answers.jsonl``)."""
        spans = gold_answers(self.ds, qids)
        texts = {q: list(self.ds.answers[q].answers) for q in spans}
        return spans, texts

    # -- stages --------------------------------------------------------------------------------
    def signals(self, prefs: RetrievalPrefs, split: str) -> tuple[StageRecord, Any]:
        limit = self.spec.query_limit
        cfg = signals_config(prefs, self.ds.hash, split, self.backend, self.embedder_id,
                             limit=limit, store=self.opener.fingerprint())
        t0 = time.perf_counter()
        out = self.stage("signals", SIGNALS_VERSION, cfg, [], lambda: _signals_output(
            self.opener.get_retriever(), self.ds, split, prefs, limit=limit))
        self.signals_s += time.perf_counter() - t0
        return out

    def fusion(self, prefs: RetrievalPrefs, sig: tuple[StageRecord, Any]
               ) -> tuple[StageRecord, Any]:
        key = stage_key("fusion", FUSION_VERSION, fusion_config(prefs), [sig[0].key])
        if ("fusion", key) not in self.outputs:
            self.outputs[("fusion", key)] = fused_run(self.cache, prefs, sig)
        return self.outputs[("fusion", key)]

    def point(self, pt: PipelinePoint) -> dict[str, Any]:
        """Every stage of one point on each split: records, run hash, metrics, per-query."""
        return {split: self.split_point(pt, split) for split in self.splits}

    def split_point(self, pt: PipelinePoint, split: str) -> dict[str, Any]:
        """Every stage of one point on one split."""
        prefs, spec = pt.prefs, self.spec
        sig = self.signals(prefs, split)
        qids = list(sig[1]["qids"])
        questions = {q: self.ds.queries[q] for q in qids}
        frec, run = self.fusion(prefs, sig)
        scorer = self.scorer(split, qids)

        def score(run: Any = run, scorer: QrelsScorer = scorer) -> dict[str, Any]:
            return scorer.evaluate_packed_run(run, spec.metrics)

        mrec, packed = self.stage("metrics", METRICS_VERSION,
                                  metrics_config(spec.metrics, split), [frec.key], score,
                                  codec="arrays")
        mout = unpack_metrics(packed)
        chunker = make_chunker(prefs.chunking).chunker_id
        ccfg = {"chunker": chunker, "strategy": prefs.chunking.strategy,
                "top_k_items": prefs.top_k_items, "top_k_chunks": prefs.top_k_chunks,
                "per_item_chunk_cap": prefs.per_item_chunk_cap,
                "late": _late_params(self.embedder_id)}
        crec, chunks = self.stage("chunks", CHUNKS_VERSION, ccfg, [frec.key], lambda: (
            st.chunk_output(self.late, self.opener.store, prefs,
                            [(q, questions[q]) for q in qids], run, progress=self.progress,
                            desc=f"chunks {split} {chunker}")))
        gold, gold_texts = self.gold(qids)
        kcfg = {"metrics": list(spec.metrics), "k": sorted(set(spec.chunk_k)),
                "match": ANSWER_MATCH_RULE, "projection": PROJECTION, "split": split}
        krec, kout = self.stage("chunk_metrics", CHUNK_METRICS_VERSION, kcfg, [crec.key],
                                lambda: chunk_metrics(chunks, self._qrels(split, qids),
                                                         gold, spec.metrics, spec.chunk_k,
                                                         scorer))
        records = [sig[0], frec, mrec, crec, krec]
        metrics = {**mout["means"], **kout["means"]}
        per_query = {**mout["per_query"], **kout["per_query"]}
        prompts_sha = None
        if pt.policy is not None:
            answer = self.answer_stages(pt, split, crec, chunks, questions, gold, gold_texts)
            records += answer["records"]
            metrics.update(answer["metrics"]["means"])
            per_query.update(answer["metrics"]["per_query"])
            prompts_sha = answer["prompts_sha256"]
        return {"stages": [r.as_dict() for r in records], "run_hash": frec.output_hash,
                "metrics": metrics, "n_queries": len(qids), "prompts_sha256": prompts_sha,
                "per_query": per_query}

    def _qrels(self, split: str, qids: Sequence[str]) -> dict[str, dict[str, int]]:
        qrels = self.ds.qrels[split]
        return {q: qrels[q] for q in qids if q in qrels}

    def answer_stages(self, pt: PipelinePoint, split: str, crec: StageRecord, chunks: Any,
                      questions: dict[str, str], gold: Any, gold_texts: Any) -> dict[str, Any]:
        spec = self.spec
        policy = _policy(pt)
        scfg = {"policy": pt.policy, "policy_version": policy.policy_version,
                "policy_sha256": policy.sha256(),
                "index_version": self.index_version, "embedding_model": self.embedder_id}
        srec, sel = self.stage("selection", SELECTION_VERSION, scfg, [crec.key], lambda: (
            st.selection_output(chunks, questions, policy, self.index_version,
                                str(self.embedder_id), pt.prefs.top_k_chunks)))
        pcfg = {"contract": PROMPT_CONTRACT_VERSION, "template_sha256": TEMPLATE_SHA256}
        prec, prompts = self.stage("prompt", PROMPT_VERSION, pcfg, [srec.key],
                                   lambda: st.prompt_output(sel, questions, policy))
        llm = get_llm(spec.reader, **spec.reader_options)
        rcfg = {"name": spec.reader, "options": dict(spec.reader_options),
                "model": getattr(llm, "model_name", None)}
        rrec, reader = self.stage("reader", READER_VERSION, rcfg, [prec.key], lambda: (
            st.reader_output(prompts, llm, policy.reserved_output_tokens)))
        vrec, valid = self.stage("validation", VALIDATION_VERSION, {"validator": "R5"},
                                 [prec.key, rrec.key],
                                 lambda: st.validation_output(prompts, reader))
        acfg = {"metrics": list(STATUSES), "match": ANSWER_MATCH_RULE, "squad": "v1.1"}
        arec, aout = self.stage("answer_metrics", ANSWER_METRICS_VERSION, acfg,
                                [crec.key, prec.key, vrec.key],
                                lambda: st.answer_metrics_output(chunks, prompts, valid, gold,
                                                          gold_texts))
        return {"records": [srec, prec, rrec, vrec, arec], "metrics": aout,
                "prompts_sha256": prompts["prompts_sha256"]}


@release_on_error
def run_pipeline_sweep(spec: SweepSpec, *, cache_dir: str | Path = DEFAULT_CACHE_DIR,
                       db: str | None = None, jobs: int = 0, tracker: Any = None,
                       progress: bool = True, dataset: Dataset | None = None,
                       on_point: Callable[[PointResult], None] | None = None) -> SweepResult:
    """Score every point of a pipeline spec on its tune and report splits (see the module doc).
    ``jobs``: numba threads for ranx's metrics, 0 for all cores (points run one after
    another)."""
    with compiled_threads(jobs):
        return _run_pipeline_sweep(spec, cache_dir=cache_dir, db=db, tracker=tracker,
                                   progress=progress, dataset=dataset, on_point=on_point)


def _run_pipeline_sweep(spec: SweepSpec, *, cache_dir: str | Path, db: str | None,
                        tracker: Any, progress: bool, dataset: Dataset | None,
                        on_point: Callable[[PointResult], None] | None) -> SweepResult:
    t_start = time.perf_counter()
    splits = [spec.tune_split, spec.report_split]
    ds = dataset or load_dataset(spec.dataset, splits=splits)
    cache = StageCache(cache_dir)
    opener = _Pipeline(spec, ds, db or spec.db, progress)
    backend = backend_of(db or spec.db, spec.backend)
    emb_id = opener.embedder_id
    grid = spec.pipeline_points()
    baseline = spec.baseline_point()
    todo = list(grid)
    base_key = None
    if baseline is not None:
        base_key = pipeline_config(spec, baseline, emb_id, backend)[0]
        if base_key not in {pipeline_config(spec, p, emb_id, backend)[0] for p in grid}:
            todo.append(baseline)
    sweep = _Sweep(spec, ds, cache, opener, backend, emb_id, progress)
    done = tracker.logged_config_hashes() if tracker is not None else set()
    points: list[PointResult] = []
    per_query: dict[str, dict[str, dict[str, dict[str, float]]]] = {}
    t_points = time.perf_counter()
    bar = tqdm(total=len(todo), desc=f"sweep {spec.name}", unit="pt", disable=not progress)
    try:
        for pt in todo:
            out = sweep.point(pt)
            chash, config = pipeline_config(spec, pt, emb_id, backend)
            manifest = PointManifest(
                sweep=spec.name, sweep_hash=spec.hash, dataset=ds.name, dataset_hash=ds.hash,
                config_hash=chash, config=config, embedder_name=spec.embedder,
                metrics=list(spec.metrics),
                splits={s: SplitManifest(split=s, **{k: v for k, v in out[s].items()
                                                     if k != "per_query"}) for s in splits},
                environment=environment())
            c = pt.prefs.chunking
            point = PointResult(
                label=point_label(pt.prefs) + "|" + chunk_label(pt.prefs) + _selection_label(pt),
                config_hash=chash, scoring=pt.prefs.scoring.model_dump(),
                depth=(pt.prefs.fts.top_k, pt.prefs.vector.top_k),
                metrics={s: out[s]["metrics"] for s in splits}, manifest=manifest,
                is_baseline=chash == base_key,
                chunking={"chunker_id": c.chunker_id, "max_chunk_tokens": c.max_chunk_tokens,
                          "overlap_tokens": c.overlap_tokens,
                          "top_k_chunks": pt.prefs.top_k_chunks,
                          "per_item_chunk_cap": pt.prefs.per_item_chunk_cap,
                          "chunker": make_chunker(c).chunker_id},
                selection=None if pt.policy is None else {
                    **config["selection"], "overrides": dict(pt.overrides)})
            points.append(point)
            per_query[chash] = {s: out[s]["per_query"] for s in splits}
            point_done(point, cache, tracker, done, on_point, bar)
    finally:
        bar.close()
        opener.close()
    t_end = time.perf_counter()
    missing = [p.label for p in points if spec.primary not in p.metrics[spec.tune_split]]
    if missing:
        raise ValueError(f"primary metric {spec.primary!r} was not computed for {missing[0]} "
                         f"on {spec.tune_split} (answer_recall@k and the gold-based answer "
                         f"metrics need gold answers: {ds.name} has "
                         f"{'some' if ds.answers else 'no'} answers.jsonl)")
    best = choose_best(points[:len(grid)], spec.tune_split, spec.primary)
    baseline_point = next((p for p in points if p.is_baseline), None)
    significance: list[Comparison] = []
    metric_names = sorted({m for p in points for m in p.metrics[spec.report_split]
                           if m in per_query[p.config_hash][spec.report_split]})
    if baseline_point is not None:
        ranked = sorted(points[:len(grid)], key=lambda p: (
            -p.metrics[spec.tune_split][spec.primary], p.config_hash))[:spec.significance_top]
        # the metrics a swept stage can move: the fused run's when fusion is swept, the chunk
        # metrics when fusion or chunking is, the answer metrics when selection is
        g = spec.grid
        fusion = any(getattr(g, a) is not None for a in FUSION_AXES)
        chunking = fusion or g.chunking is not None
        headline = [spec.primary, *(spec.metrics if fusion else [])]
        if chunking:
            headline += [*(f"{PROJECTION}:{m}" for m in spec.metrics),
                         *(f"answer_recall@{k}" for k in spec.chunk_k)]
        if g.selection is not None:
            headline += ["answer_f1", "answer_em", "evidence_answer_recall"]
        wanted = [m for m in dict.fromkeys(headline) if m in metric_names]
        significance = compare_to_baseline(
            _paired(per_query[baseline_point.config_hash][spec.report_split], wanted),
            [(p.label, _paired(per_query[p.config_hash][spec.report_split], wanted))
             for p in ranked], wanted, test=spec.stat_test, alpha=spec.alpha)
    ci = {s: bootstrap_ci(per_query[best.config_hash][s].get(spec.primary, {})) for s in splits}
    result = SweepResult(
        name=spec.name, sweep_hash=spec.hash, dataset=ds.name, dataset_hash=ds.hash,
        tune_split=spec.tune_split, report_split=spec.report_split, primary=spec.primary,
        points=points, best=best, baseline=baseline_point, significance=significance, ci=ci,
        timings={"signals_s": round(sweep.signals_s, 3),
                 "points_s": round(t_end - t_points - sweep.signals_s, 3),
                 "total_s": round(time.perf_counter() - t_start, 3),
                 "points_per_s": round(len(points) / (t_end - t_points), 1)
                 if t_end > t_points else 0.0},
        computed=dict(cache.computed), reused=dict(cache.reused),
        repaired=dict(cache.repaired))
    if tracker is not None:
        result = result.model_copy(update={"tracking": tracker.finish(result)})
    return result


def _paired(per_query: dict[str, dict[str, float]], metrics: Sequence[str]
            ) -> dict[str, dict[str, float]]:
    return {m: per_query.get(m, {}) for m in metrics}
