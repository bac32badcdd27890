"""MLflow logging of a one-off experiment (``aiblox eval --mlflow``): one run per system, laid
out and written by the one writer (:func:`aiblox.engine.tracking.log_runs`, the layout a sweep's
point has), so that ``aiblox eval verify RUN_ID`` re-checks a system's run from its manifest
alone.

A retrieval system (a mode or a ``--pipeline``) was scored by :func:`aiblox.engine.evaluate.
evaluate_retrieval` as a one-point run of the engine, whose result carries the point's stage
records: its manifest (:func:`result_manifest`) is the sweep's
:class:`~aiblox.engine.manifest.PointManifest` built from them, not scored again. Its run
carries tag ``aiblox.kind=point`` (what ``verify`` accepts), ``aiblox.source=eval``,
``aiblox.primary`` (the first metric computed: ``aiblox compare``'s headline) and
``aiblox.trec_hash.<split>`` (the ``run`` hash ``aiblox eval`` prints, a reference
``compare`` and ``verify`` take), params
(the settings of its config that apply to it), metrics ``<split>.<metric>`` (the manifest's
values, which ``verify`` compares) and their p-values, and artifacts ``manifest.json``,
``run.<split>.trec``, ``per_query.<split>.parquet`` and ``experiment.json`` (the whole table,
:meth:`Experiment.as_json`). An external run file has no config to re-execute: its run
(``aiblox.kind=run``) holds the file's sha256 and path and the dataset's name as params (the
dataset's hash is the tag ``aiblox.dataset_hash``: ``aiblox compare`` names a dataset by both),
the metrics, the per-query values, the run file and ``experiment.json``. mlflow is imported
here only through the tracking module (the ``tracking`` extra).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from aiblox.data import Dataset
from aiblox.embedding.device import describe_device
from aiblox.engine.manifest import PointManifest, SplitManifest, environment
from aiblox.engine.result import EvalResult
from aiblox.experiment.table import EVAL_EXPERIMENT, Experiment, trec_run_text
from aiblox.hashing import sha256_hex
from aiblox.metrics import canonical_metrics

__all__ = ["EVAL_EXPERIMENT", "log_experiment", "result_manifest"]


def result_manifest(dataset: Dataset, result: EvalResult, *, embedder: str,
                    metrics: Sequence[str], device: str = "cpu") -> PointManifest:
    """The sweep manifest of a system :func:`~aiblox.engine.evaluate.evaluate_retrieval` scored
    (``result``: its config, config hash, stage records and run hash; nothing is scored
    again). ``embedder`` is the registry name the manifest records, ``device`` the one the
    eval ran on. ``ValueError`` when ``result`` holds no stage records."""
    if not result.stages or result.stage_run_hash is None:
        raise ValueError(f"{result.mode} on {result.split}: the result holds no stage records "
                         f"(score it with aiblox.engine.evaluate.evaluate_retrieval)")
    chash, split = result.hashes["config"], result.split
    return PointManifest(
        sweep="eval", sweep_hash=sha256_hex({"eval": dataset.name, "split": split,
                                             "config_hash": chash,
                                             "metrics": canonical_metrics(metrics)}),
        dataset=dataset.name, dataset_hash=dataset.hash, dataset_path=dataset.source,
        config_hash=chash, config=result.config,
        embedder_name=embedder, device=describe_device(device), metrics=list(metrics),
        splits={split: SplitManifest(split=split, n_queries=result.n_queries,
                                     stages=list(result.stages), run_hash=result.stage_run_hash,
                                     metrics=dict(result.metrics))},
        environment=environment())


def log_experiment(exp: Experiment, manifests: Mapping[str, PointManifest], tracking_uri: str,
                   experiment: str = EVAL_EXPERIMENT) -> dict[str, str]:
    """Log every system of ``exp`` as one MLflow run, in one batch (see the module doc);
    ``manifests`` holds the retrieval systems' manifests by name. Returns ``{system name: run
    id}``."""
    from aiblox.engine.tracking import PointLog, log_runs
    from aiblox.engine.tracking.layout import TAG_PRIMARY, TAG_TREC_HASH

    table = exp.as_json()
    eval_id = sha256_hex(table)[:16]
    split = exp.split
    files = {"experiment.json": json.dumps(table, sort_keys=True, indent=1).encode("utf-8")}
    logs = []
    for i, s in enumerate(exp.systems):
        m = manifests.get(s.name)
        sig = table["systems"][i]["significance"]
        extra = {}
        for metric, d in sorted(sig.items()):
            key = metric.replace("@", "_at_")
            extra[f"{split}.{key}.p"] = float(d["p"])
            extra[f"{split}.{key}.p_adjusted"] = float(d["p_adjusted"])
        logs.append(PointLog(
            kind="point" if m is not None else "run", label=s.name,
            metrics={split: m.splits[split].metrics if m is not None else s.metrics},
            per_query={split: s.per_query}, manifest=m,
            dataset_hash=s.hashes["dataset"],
            params={} if m is not None else {"run_file": str(s.source),
                                             "run_file_sha256": s.hashes.get("file", ""),
                                             "dataset": exp.dataset},
            tags={"aiblox.source": "eval", "aiblox.eval_id": eval_id,
                  TAG_PRIMARY: exp.metrics[0], f"{TAG_TREC_HASH}.{split}": s.hashes["run"],
                  "aiblox.baseline": str(s.name == exp.baseline).lower(),
                  "aiblox.test": exp.test, "aiblox.correction": exp.correction},
            extra_metrics=extra, runs={split: trec_run_text(s.run, s.name)}, files=files))
    ids = log_runs(tracking_uri, experiment, logs)
    return {s.name: rid for s, rid in zip(exp.systems, ids, strict=True)}
