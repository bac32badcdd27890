"""A point's MLflow layout, in one place: its tags, params (the flattened config, restricted to the
settings that apply to it), metric names (``<split>.<metric>``), artifact files, and the parent's
conclusion (cross-validation metrics, the Pareto summary).

:class:`PointLog` is a point as any writer has it (a sweep's point, an ``aiblox eval`` system, a
notebook's fusion setting); :func:`point_record` turns it into the one run the layout describes
(:class:`~aiblox.engine.bulk_mlflow.RunRecord`), which :mod:`aiblox.engine.tracking.writer`
writes. The readers of the layout are in :mod:`aiblox.engine.tracking.reader`.

Artifacts of a point: ``manifest.json`` (when it has one), ``per_query.<split>.parquet``
(``query_id, metric, value``, written with pyarrow), ``evidence.<split>.parquet`` for selection
points (``query_id, rank, chunk_id, item_id``) and ``run.<split>.trec`` where the writer gives
the run's text (``aiblox eval``; a sweep writes it for the points its conclusion names, at the
end: every other point's run is written from the stage cache on demand, ``aiblox runs export``).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiblox.data.trec import trec_run_text
from aiblox.engine.algebra import from_data, settings
from aiblox.engine.applies import param_applies
from aiblox.engine.bulk_mlflow import RunRecord
from aiblox.engine.manifest import PointManifest
from aiblox.engine.settings import scoring_read
from aiblox.inputs import has_url_password, mask_url_passwords

__all__ = [
    "EVIDENCE_COLUMNS",
    "MANIFEST",
    "PointLog",
    "RERUN_ENV",
    "TAG_CONFIG",
    "TAG_KIND",
    "TAG_LABEL",
    "TAG_PARENT",
    "TAG_PIPELINE",
    "TAG_PRIMARY",
    "TAG_RUN_HASH",
    "TAG_DATASET",
    "TAG_OUTSIDE_GRID",
    "TAG_RERUN_OPTIONS",
    "TAG_SPEC_PATH",
    "TAG_SWEEP",
    "TAG_TREC_HASH",
    "TAG_WORKDIR",
    "cv_metrics",
    "cv_summary",
    "cv_tags",
    "evidence_file",
    "flatten",
    "logged_params",
    "metric_key",
    "pareto_summary",
    "per_query_file",
    "point_record",
    "rerun_command",
    "rerun_options",
    "run_file",
    "split_file",
    "trec_run",
]


TAG_KIND = "aiblox.kind"
"""What a run is: ``sweep`` (a parent), ``point`` (a sweep's point, an ``aiblox eval`` mode),
``run`` (an external run file scored by ``aiblox eval``), ``notebook``."""


TAG_SWEEP = "aiblox.sweep_hash"


TAG_CONFIG = "aiblox.config_hash"


TAG_LABEL = "aiblox.label"


TAG_PARENT = "mlflow.parentRunId"


TAG_PIPELINE = "aiblox.pipeline"
"""A retrieval pipeline point's pipeline as an expression, every stage's parameters shown
(:meth:`~aiblox.engine.algebra.Pipeline.expression`): ``bm25(k1=0.5) >> rm3 >> bm25``. Its
param ``pipeline`` is the shape its points share, which a report's plots group by."""


TAG_PRIMARY = "aiblox.primary"
"""An ``aiblox eval`` run's primary metric: the first metric it computed (a sweep's point has
its sweep's ``spec.primary`` param on the parent instead), the headline of ``aiblox compare``."""


TAG_RUN_HASH = "aiblox.run_hash"
"""``aiblox.run_hash.<split>``: a point's run hash on a split, its manifest's (the output hash of
the stage whose run the metrics scored), as ``aiblox report`` shows it."""


TAG_TREC_HASH = "aiblox.trec_hash"
"""``aiblox.trec_hash.<split>``: the hash of a system's run as its TREC file carries it
(:func:`aiblox.engine.result.run_hash`), the ``run`` hash ``aiblox eval`` prints; logged by
``aiblox eval --mlflow``. ``aiblox compare`` and ``aiblox eval verify`` take a prefix of either
run hash."""


EVIDENCE_COLUMNS = ["query_id", "rank", "chunk_id", "item_id"]
"""Columns of ``evidence.<split>.parquet``: the evidence a selection point kept, in order."""


MANIFEST = "manifest.json"
"""A point's manifest artifact (what ``aiblox eval verify`` re-executes)."""


TAG_DATASET = "aiblox.dataset_hash"
"""The content hash of the data a run scored (:attr:`aiblox.data.Dataset.hash`), on a point and
on its sweep's parent run."""

TAG_SPEC_PATH = "aiblox.spec_path"
"""Parent-run tag: the spec file the sweep was run from (for the report's reproduce command),
relative to :data:`TAG_WORKDIR` when it lies under it, else absolute."""

TAG_WORKDIR = "aiblox.workdir"
"""Parent-run tag: the folder the sweep was run from, resolved. The spec path, the spec's
relative ``dataset``, ``db`` and ``vectors`` paths and the rerun options are relative to it,
so the report's reproduce command runs there (``cd DIR && aiblox sweep ...`` from elsewhere);
absent on parents logged before it was recorded."""

TAG_OUTSIDE_GRID = "aiblox.outside_grid"
"""Point tag, ``true`` on a baseline scored as a point of its own (no grid point has its
config): the report's per-value tables leave it out."""

TAG_RERUN_OPTIONS = "aiblox.rerun_options"
"""Parent-run tag: the options beside the spec that the sweep's points depend on, as typed
(``--db store.duckdb --cache-dir /mnt/stages``) but with every URL's password masked
(:func:`rerun_options`), for the report's reproduce command; absent when the defaults were
used."""

RERUN_ENV = {"--db": "AIBLOX_DB", "--cache-dir": "AIBLOX_CACHE",
             "--tracking-uri": "AIBLOX_TRACKING"}
"""The environment variable a rerun command reads an option's value from when that value holds
a password (the names ``docs/distributed.md`` uses)."""


def rerun_options(given: Sequence[tuple[str, str]]) -> str:
    """The options given beside a spec (``(option, value)`` pairs, empty values left out) as a
    shell takes them, each URL's password masked (``--db
    'postgresql+psycopg://me:***@host/db'``): the value of :data:`TAG_RERUN_OPTIONS`, which
    everyone reading the MLflow store sees."""
    return shlex.join([x for option, value in given if value
                       for x in (option, mask_url_passwords(value))])


def rerun_command(command: str, options: str, *more: str) -> str:
    """``command`` (``aiblox sweep SPEC``, already a shell's text) with ``options`` (shell words:
    a :data:`TAG_RERUN_OPTIONS` value) and the words ``more``, and no password: an option whose
    value holds one (a URL's, masked, or in clear in a tag logged before tags were masked)
    reads its value from an environment variable (:data:`RERUN_ENV`: ``--db "$AIBLOX_DB"``),
    and a comment at the end says what the variable holds (``# AIBLOX_DB:
    postgresql+psycopg://me:***@host/db with its password``), so the command runs as written
    once the variable is set. Any other URL's password is masked."""
    try:
        words = [*shlex.split(options), *more]
    except ValueError:  # not a shell's words (a tag set by hand): shown as it is, masked
        return mask_url_passwords(" ".join(filter(None, [command, options, shlex.join(more)])))
    shown, notes = [command], []
    for before, word in zip(["", *words], words, strict=False):
        env = RERUN_ENV.get(before)
        if env is not None and has_url_password(word):
            shown.append(f'"${env}"')
            notes.append(f"{env}: {mask_url_passwords(word)} with its password")
        else:
            shown.append(shlex.quote(mask_url_passwords(word)))
    return " ".join(shown) + (f"  # {'; '.join(notes)}" if notes else "")


def flatten(value: Any, prefix: str = "") -> dict[str, str]:
    """``{"a": {"b": 1}}`` to ``{"a.b": "1"}``; empty dicts and lists as JSON text."""
    out: dict[str, str] = {}
    if isinstance(value, dict) and value:
        for k in sorted(value):
            out.update(flatten(value[k], f"{prefix}{k}."))
        return out
    text = json.dumps(value, sort_keys=True) if isinstance(value, dict | list) else str(value)
    out[prefix.rstrip(".")] = text
    return out


def split_file(split: str) -> str:
    """A split's name in artifact file names: a derived split's ``:`` and ``/`` are written
    ``-`` and ``of`` (``test:0/2`` is ``test-0of2``); plain names stay as they are."""
    return split.replace(":", "-").replace("/", "of")


def per_query_file(split: str) -> str:
    """``per_query.<split>.parquet``."""
    return f"per_query.{split_file(split)}.parquet"


def evidence_file(split: str) -> str:
    """``evidence.<split>.parquet``."""
    return f"evidence.{split_file(split)}.parquet"


def run_file(split: str) -> str:
    """``run.<split>.trec``."""
    return f"run.{split_file(split)}.trec"


def metric_key(split: str, metric: str) -> str:
    """MLflow metric name of a ranx metric on a split: ``test.ndcg_at_10``."""
    return f"{split}.{metric.replace('@', '_at_')}"


def trec_run(run: dict[str, list[list[Any]]], tag: str) -> str:
    """TREC run format: ``qid Q0 doc rank score tag`` per line, queries sorted by id, scores
    strictly decreasing (:func:`aiblox.data.trec.trec_run_text`: trec_eval scores the ranking
    the sweep scored)."""
    return trec_run_text(run, tag)


def cv_metrics(cv: Any) -> dict[str, float]:
    """The parent run's metrics of a k-fold result (:class:`~aiblox.sweep.crossval.
    CrossValidation`): per fold ``cv.fold<i>.tune`` / ``.held_out`` / ``.gap``, the means, the
    pooled held-out score and, with a baseline, the margin, its interval and the p-value."""
    out = {}
    for r in cv.rows:
        out.update({f"cv.fold{r.fold}.tune": r.tune, f"cv.fold{r.fold}.held_out": r.held_out,
                    f"cv.fold{r.fold}.gap": r.gap})
    out.update({"cv.mean_tune": cv.mean_tune, "cv.mean_held_out": cv.mean_held_out,
                "cv.mean_gap": cv.mean_gap, "cv.pooled_held_out": cv.pooled_held_out})
    if cv.margin is not None:
        out.update({"cv.baseline_mean": cv.baseline_mean, "cv.margin": cv.margin,
                    "cv.margin_low": cv.margin_low, "cv.margin_high": cv.margin_high,
                    "cv.p_value": cv.p_value, "cv.beats_baseline": float(cv.beats_baseline)})
    return out


def cv_summary(cv: Any) -> dict[str, Any]:
    """``sweep_summary.json``'s ``cv``: the k-fold result as JSON less the fold ids, the
    candidates and every query's held-out value (those are in ``cv_folds.json``, the whole
    result)."""
    return dict(cv.model_dump(mode="json", exclude={"per_query", "fold_ids", "candidates"}))


def cv_tags(cv: Any) -> dict[str, str]:
    """The parent run's tags of a k-fold result: per fold the chosen point's config hash
    (``aiblox.cv.fold<i>.config_hash``) and the verdict (``aiblox.cv.verdict``, its first
    5,000 characters: MLflow's limit on a tag's value)."""
    tags = {f"aiblox.cv.fold{r.fold}.config_hash": r.config_hash for r in cv.rows}
    tags["aiblox.cv.verdict"] = cv.verdict[:5000]
    return tags


def _with_field_defaults(params: dict[str, str]) -> dict[str, str]:
    """``params`` with BM25 field weighting written out at its defaults (a config leaves
    ``fts.title_weight`` 1.0 and ``fts.title_b`` None out, so its hashes stay those from before
    the settings existed): every point then has the param, and a report's per-axis tables
    hold the unweighted point too."""
    out = dict(params)
    for key in params:
        if key.endswith("fts.k1"):
            head = key[:-len("k1")]
            out.setdefault(f"{head}title_weight", "1.0")
            out.setdefault(f"{head}title_b", "None")
    return out


def logged_params(config: Mapping[str, Any]) -> dict[str, str]:
    """A point's MLflow params: its config flattened (field weighting at its defaults; a
    retrieval pipeline as ``pipeline``, its shape, and ``pipeline.<stage>.<parameter>``, or
    ``pipeline.<stage>.<n>.<parameter>`` for the ``n``-th of stages of one name that set it
    differently, :func:`aiblox.engine.algebra.settings`; its expression is tag
    :data:`TAG_PIPELINE`), less
    the settings that do not apply to it (:func:`aiblox.engine.applies.param_applies`: no
    PostgreSQL settings on a DuckDB point, no chunking settings without chunk stages, no
    ``vector.*`` for BM25, no fusion setting a pipeline does not read ...). The config hash
    and the manifest keep every setting."""
    flat = _with_field_defaults(flatten({k: v for k, v in config.items() if k != "pipeline"}))
    if config.get("pipeline") is not None:  # its shape and stage settings, not its JSON
        flat.update(flatten({f"pipeline.{k}" if k != "pipeline" else k: v
                             for k, v in settings(from_data(config["pipeline"])).items()}))
    read = scoring_read(config)
    return {k: v for k, v in dict(sorted(flat.items())).items()
            if param_applies(k, config, read)}


def _parquet(columns: dict[str, Any]) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    sink = pa.BufferOutputStream()
    pq.write_table(pa.table(columns), sink)
    return bytes(sink.getvalue().to_pybytes())


def per_query_bytes(per_query: Mapping[str, Mapping[str, float]]) -> bytes:
    """``per_query.<split>.parquet``: one row ``query_id, metric, value`` per query and metric,
    by metric then query id."""
    import pyarrow as pa

    qids: list[str] = []
    names: list[str] = []
    values: list[float] = []
    for metric in sorted(per_query):
        vals = per_query[metric]
        keys = sorted(vals)
        qids += keys
        names += [metric] * len(keys)
        values += [float(vals[q]) for q in keys]
    return _parquet({"query_id": pa.array(qids, pa.string()),
                     "metric": pa.array(names, pa.string()),
                     "value": pa.array(values, pa.float64())})


def evidence_bytes(rows: Sequence[Mapping[str, Any]]) -> bytes:
    """``evidence.<split>.parquet``: the rows of :func:`aiblox.engine.outputs.selected_evidence`
    (``query_id, rank, chunk_id, item_id``)."""
    import pyarrow as pa

    return _parquet({"query_id": pa.array([r["query_id"] for r in rows], pa.string()),
                     "rank": pa.array([int(r["rank"]) for r in rows], pa.int64()),
                     "chunk_id": pa.array([r["chunk_id"] for r in rows], pa.string()),
                     "item_id": pa.array([r["item_id"] for r in rows], pa.string())})


def manifest_bytes(manifest: PointManifest) -> bytes:
    """``manifest.json``: the manifest as JSON (keys sorted, indented)."""
    return json.dumps(manifest.model_dump(mode="json"), sort_keys=True,
                      indent=1).encode("utf-8")


@dataclass
class PointLog:
    """One point's run, as a writer has it: a sweep's point, an ``aiblox eval`` system, a
    notebook's setting. :func:`point_record` lays it out."""

    kind: str
    """Tag ``aiblox.kind``: ``point``, ``run`` (an external run file) or ``notebook``."""
    label: str
    """Its label (tag ``aiblox.label`` and the run name)."""
    metrics: Mapping[str, Mapping[str, float]]
    """``{split: {metric: mean}}``: metrics ``<split>.<metric>``."""
    per_query: Mapping[str, Mapping[str, Mapping[str, float]]] = field(default_factory=dict)
    """``{split: {metric: {query_id: value}}}``: ``per_query.<split>.parquet``."""
    manifest: PointManifest | None = None
    """The point's manifest: ``manifest.json``, its params (its config), its hashes as tags."""
    config: Mapping[str, Any] | None = None
    """Without a manifest: the config its params are logged from."""
    config_hash: str | None = None
    """Without a manifest: tag ``aiblox.config_hash``."""
    dataset_hash: str | None = None
    """Without a manifest: tag ``aiblox.dataset_hash``."""
    run_hashes: Mapping[str, str] = field(default_factory=dict)
    """Without a manifest: tags ``aiblox.run_hash.<split>``."""
    tags: Mapping[str, str] = field(default_factory=dict)
    """More tags (the parent run, the sweep hash, the baseline flag, ...)."""
    params: Mapping[str, str] = field(default_factory=dict)
    """More params, as they are."""
    extra_metrics: Mapping[str, float] = field(default_factory=dict)
    """More metrics, by their MLflow names (``test.ndcg_at_10.p``)."""
    evidence: Mapping[str, Sequence[Mapping[str, Any]]] = field(default_factory=dict)
    """``{split: rows}`` of a selection point: ``evidence.<split>.parquet``."""
    runs: Mapping[str, str] = field(default_factory=dict)
    """``{split: TREC text}``: ``run.<split>.trec``."""
    files: Mapping[str, bytes] = field(default_factory=dict)
    """More artifacts, by file name (``experiment.json``)."""


def point_record(log: PointLog) -> RunRecord:
    """The run of ``log`` in the layout (see the module doc)."""
    m = log.manifest
    tags = {TAG_KIND: log.kind, TAG_LABEL: log.label}
    if m is not None:
        tags.update({TAG_CONFIG: m.config_hash, TAG_DATASET: m.dataset_hash,
                     "aiblox.manifest_hash": m.manifest_hash})
        tags.update({f"{TAG_RUN_HASH}.{s}": sm.run_hash for s, sm in m.splits.items()})
        if m.environment.get("git_commit"):
            tags["aiblox.git_commit"] = str(m.environment["git_commit"])
    else:
        if log.config_hash:
            tags[TAG_CONFIG] = log.config_hash
        if log.dataset_hash:
            tags[TAG_DATASET] = log.dataset_hash
        tags.update({f"{TAG_RUN_HASH}.{s}": h for s, h in log.run_hashes.items()})
    config = m.config if m is not None else log.config
    if config is not None and config.get("pipeline") is not None:
        tags[TAG_PIPELINE] = from_data(config["pipeline"]).expression()
    tags.update(log.tags)
    params = {**(logged_params(config) if config is not None else {}), **log.params}
    metrics = {metric_key(s, k): float(v) for s, vals in log.metrics.items()
               for k, v in vals.items()}
    metrics.update({k: float(v) for k, v in log.extra_metrics.items()})
    files: dict[str, bytes] = {}
    if m is not None:
        files[MANIFEST] = manifest_bytes(m)
    for split, text in log.runs.items():
        files[run_file(split)] = text.encode("utf-8")
    for split, values in log.per_query.items():
        files[per_query_file(split)] = per_query_bytes(values)
    for split, rows in log.evidence.items():
        files[evidence_file(split)] = evidence_bytes(rows)
    files.update(log.files)
    return RunRecord(name=log.label, tags=tags, params=params, metrics=metrics,
                     artifacts=files)


def pareto_summary(result: Any) -> dict[str, Any]:
    """``sweep_summary.json``'s ``pareto``: the objectives and their directions (``[name,
    direction]`` pairs, in order), the front (by config hash, best first by primary) and every
    point's objective values on the tune and report splits, in the objectives' order
    (``front``, ``baseline`` flags), for the report's table and plots."""
    from aiblox.metrics.pareto import objective_values

    names = list(result.objectives)
    front = set(result.pareto)
    return {"objectives": [[n, d] for n, d in result.objectives.items()],  # ordered pairs:
            "front": list(result.pareto),  # the summary's keys are sorted when written
            "points": [{"label": p.label, "config_hash": p.config_hash,
                        "front": p.config_hash in front, "baseline": p.is_baseline,
                        "tune": objective_values(p, result.tune_split, names),
                        "report": (objective_values(p, result.report_split, names)
                                   if result.report_split else [])}
                       for p in result.points]}
