"""The reranker-training stage of a sweep: ``[finetune_reranker]`` in a spec trains a
cross-encoder on judged queries the sweep never scores, and every ``cross_encoder`` stage with
``model = "finetune"`` reranks with it.

::

    pipeline = "bm25 + dense >> cross_encoder"
    [stages.cross_encoder]
    model = "finetune"
    top_n = 30
    [finetune_reranker]
    split = "train"        # less the tune and report splits' queries
    base = "minilm"        # the layers it starts from
    epochs = 1
    negatives = 3          # per group, from its query's BM25 top negative_depth not judged relevant
    seed = 0

What is trained on: the judged queries of ``split`` less every query of the sweep's tune and
report splits, each relevant document of each (grade >= 1) a group with ``negatives`` documents
drawn from the query's top ``negative_depth`` BM25 documents (the spec's ``[base]`` full-text
settings) not judged relevant (:func:`aiblox.embedding.cross_encoder_finetune.train_cross_encoder`).
It is keyed like the tuned embedder (:mod:`aiblox.sweep.finetune`): the sha256 of the base
model's id, the dataset's hash, the split and the query ids trained on, the full-text settings
that drew the negatives and the recipe; the folder is ``<cache-dir>/models/ce-<16 hex of the
key>`` (with a remote stage cache, ``.aiblox/models/`` on the machine that trains it, published
to the cache's ``models/`` and copied from there by the team's other machines, every file
checked, as the tuned embedder is: :func:`aiblox.sweep.finetune.shared_model`), written under a
temporary name and renamed, trained once. The points' pipelines name it in place of
``finetune`` as ``finetune:ce-<16 hex of the key>@<16 hex of its files' sha256>``
(:func:`~aiblox.embedding.sentence_transformers.trained_ref`), never by its folder: a point's
config hash and label are the same whatever ``--cache-dir`` the sweep ran with (a cache copied,
moved or shared logs no point twice); the sweep's settings carry the folder to every process that
scores a point, and the point's manifest (``models``) to ``aiblox eval verify``. The stage's key
holds the model's id (the sha256 of its files), so ``aiblox eval verify`` checks the very weights
a point was scored with.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiblox.data import Dataset
from aiblox.embedding.cross_encoder_finetune import train_cross_encoder
from aiblox.embedding.device import describe_device, resolve_device
from aiblox.embedding.finetune import TrainingPair
from aiblox.embedding.sentence_transformers import FINETUNED, model_folder
from aiblox.engine.algebra import Pipeline
from aiblox.engine.compute import signals_output
from aiblox.hashing import sha256_hex
from aiblox.sweep.finetune import (
    models_root,
    shared_model,
    train_once,
    training_data,
    training_query_ids,
)

if TYPE_CHECKING:
    from aiblox.engine.settings import PipelinePoint
    from aiblox.sweep.spec import SweepSpec

__all__ = ["RERANKER_VERSION", "ensure_reranker", "reranker_key", "reranker_pairs",
           "reranker_query_ids", "uses_finetuned_reranker", "with_reranker"]

RERANKER_VERSION = 2
"""Bumped when the stage's training set or recipe changes meaning (a new key, a new model). 2: a
pair too long loses only its document's end (1 cut the query too)."""

def _finetuned_stages(p: Pipeline) -> list[str]:
    return [s.name for s in p.stages()
            if s.kind == "cross_encoder" and s.param_dict().get("model") == FINETUNED]


def uses_finetuned_reranker(p: Pipeline) -> bool:
    """Whether a ``cross_encoder`` stage of ``p`` names the trained reranker."""
    return bool(_finetuned_stages(p))


def with_reranker(points: list[PipelinePoint], ref: str) -> list[PipelinePoint]:
    """``points`` with every ``cross_encoder`` stage whose model is ``finetune`` naming the
    trained model ``ref`` (:func:`~aiblox.embedding.sentence_transformers.trained_ref`)
    instead (its key then holds the trained model's id)."""
    out = []
    for pt in points:
        names = [] if pt.pipeline is None else _finetuned_stages(pt.pipeline)
        if names:
            assert pt.pipeline is not None
            pipe = pt.pipeline.with_params({n: {"model": ref} for n in names})
            pt = dataclasses.replace(pt, pipeline=pipe)
        out.append(pt)
    return out


def reranker_query_ids(spec: SweepSpec, train: Dataset, scored: Dataset) -> list[str]:
    """The judged queries of ``[finetune_reranker] split`` in neither of the sweep's splits,
    sorted; ``ValueError`` when none is left."""
    return training_query_ids(spec, train, scored, "finetune_reranker")


def reranker_key(spec: SweepSpec, train: Dataset, base_id: str, qids: list[str]) -> str:
    """The training stage's key (see the module doc)."""
    ft = spec.finetune_reranker
    assert ft is not None
    return sha256_hex({"stage": "finetune_reranker", "version": RERANKER_VERSION,
                       "base": base_id, "dataset": train.hash, "split": ft.split,
                       "queries": sha256_hex(qids),
                       "negatives": spec.base_prefs().fts.model_dump(mode="json"),
                       "recipe": ft.recipe().model_dump(mode="json")})


def reranker_pairs(spec: SweepSpec, train: Dataset, qids: list[str], db: str | None,
                   progress: bool = False) -> list[TrainingPair]:
    """The training groups of ``qids``: each judged relevant document of a query, with the
    query's top ``negative_depth`` BM25 documents (on the store ``db``) not judged relevant as
    the candidates its negatives are drawn from."""
    from aiblox.engine.workspace import open_workspace

    ft = spec.finetune_reranker
    assert ft is not None
    judged = train.qrels[ft.split]
    base = spec.base_prefs()
    prefs = base.model_copy(update={
        "mode": "bm25", "fts": base.fts.model_copy(update={"top_k": ft.negative_depth})})
    ws = open_workspace(train, db, spec.embedder, with_vectors=False, progress=progress)
    try:
        sig = signals_output(ws.retriever, train, ft.split, prefs, progress=progress)
    finally:
        ws.close()
    wanted = set(qids)
    negatives = {q: [d for d, _ in hits if judged[q].get(d, 0) < 1]
                 for q, hits in zip(sig["qids"], sig["text"], strict=True) if q in wanted}
    pairs = []
    for q in qids:
        cands = tuple(train.corpus[d].embedding_text for d in negatives.get(q, []))
        for d, grade in sorted(judged[q].items()):
            if grade >= 1 and d in train.corpus and cands:
                pairs.append(TrainingPair(train.queries[q], train.corpus[d].embedding_text,
                                          cands))
    if not pairs and any(g >= 1 and d in train.corpus for q in qids
                         for d, g in judged[q].items()):
        raise ValueError(f"finetune_reranker.negative_depth = {ft.negative_depth}: no query of "
                         f"split {ft.split!r} trained on has a document among its top "
                         f"{ft.negative_depth} BM25 documents that is not judged relevant, to "
                         f"draw its negatives from: raise negative_depth")
    return pairs


def ensure_reranker(spec: SweepSpec, scored: Dataset, cache_root: Path | str,
                    db: str | None = None, progress: bool = True,
                    device: str | None = None) -> Path:
    """The folder of ``spec``'s trained cross-encoder, trained now on ``device`` (None: the
    spec's ``device``) unless a finished one is there. ``scored``: the sweep's dataset."""
    from aiblox.engine.context import embedder_id

    ft = spec.finetune_reranker
    assert ft is not None
    device = resolve_device(device or spec.device, "device")
    train = training_data(spec, "finetune_reranker")
    qids = reranker_query_ids(spec, train, scored)
    base_id = embedder_id(ft.base, device)
    key = reranker_key(spec, train, base_id, qids)
    folder = models_root(cache_root) / f"ce-{key[:16]}"

    def train_it() -> bool:
        pairs = reranker_pairs(spec, train, qids, db, progress)
        base = model_folder(ft.base)
        if base is None:
            raise ValueError(f"finetune_reranker.base: {ft.base!r} is not installed")
        record: dict[str, Any] = {"base": base_id, "dataset": train.name,
                                  "dataset_hash": train.hash, "split": ft.split,
                                  "queries": len(qids), "key": key}
        return train_once(folder, lambda on_step: train_cross_encoder(
            base, pairs, folder, ft.recipe(), device=device, record=record, on_step=on_step),
            steps=ft.epochs * -(-len(pairs) // ft.batch_size),
            bar=f"finetune_reranker: {ft.base} on {len(pairs)} groups ({len(qids)} queries "
                f"of {ft.split}) on {device}",
            phase_text=f"finetune_reranker: {len(pairs)} groups, {ft.epochs} epoch(s) on "
                       f"{describe_device(device)}", progress=progress)

    return shared_model(folder, cache_root, train_it)

