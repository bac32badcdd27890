"""Fine-tuning a sentence-transformers model on judged (query, relevant document) pairs, offline
and seeded: the dense side's lever that no fusion setting reaches.

The recipe is the standard one for a bi-encoder on a few hundred labelled queries (Karpukhin et
al., "Dense Passage Retrieval", EMNLP 2020; sentence-transformers'
``MultipleNegativesRankingLoss``): each batch of ``batch_size`` pairs is scored query against
every document of the batch, the other pairs' documents and ``hard_negatives`` sampled
non-relevant documents per pair (in aiblox, from BM25's top ranks: what the lexical side
confuses) being the negatives; the loss is the cross-entropy of the cosine similarities times
``scale`` toward the pair's own document. AdamW, a linear warm-up over the first ``warmup``
fraction of the steps, then a constant rate.

Deterministic for given inputs on one machine and thread count: ``torch.manual_seed(seed)``,
``random.Random(seed)`` for the order of the pairs and the negatives drawn, deterministic
algorithms (on a GPU with cuBLAS's deterministic workspace, ``CUBLAS_WORKSPACE_CONFIG``). The
saved folder (weights, tokenizer, configuration, no model card) hashes the same on a re-run;
with another torch build, thread count or device the weights may differ in the last bits, and
the model id (:func:`aiblox.embedding.sentence_transformers.model_digest`) says so. It trains
on ``device`` (``auto``: the first GPU torch sees, else the CPU:
:func:`aiblox.embedding.device.resolve_device`); off the CPU the recipe file records it.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from aiblox.embedding.device import describe_device, device_class, resolve_device
from aiblox.embedding.sentence_transformers import load_sentence_transformer

__all__ = ["RECIPE_FILE", "FineTuneConfig", "TrainingPair", "fine_tune"]

RECIPE_FILE = "aiblox_finetune.json"
"""The file a fine-tuned folder records its recipe, base model and training set in."""


class FineTuneConfig(BaseModel):
    """How a model is fine-tuned (each field enters the fine-tuning stage's key)."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    epochs: int = Field(default=3, ge=1, le=100)
    """Passes over the training pairs."""
    lr: float = Field(default=3e-5, gt=0.0, le=1.0)
    """AdamW learning rate (after the warm-up)."""
    batch_size: int = Field(default=32, ge=2, le=4096)
    """Pairs per step; the other pairs' documents are in-batch negatives."""
    warmup: float = Field(default=0.1, ge=0.0, lt=1.0)
    """Fraction of the steps over which the rate rises linearly from 0."""
    hard_negatives: int = Field(default=1, ge=0, le=16)
    """Non-relevant documents drawn per pair from its query's candidates (0: in-batch only)."""
    negative_depth: int = Field(default=30, ge=1, le=1000)
    """Candidates: the query's top ``negative_depth`` full-text (BM25) documents not judged
    relevant."""
    scale: float = Field(default=20.0, gt=0.0, le=1000.0)
    """Inverse temperature of the cosine scores in the loss (sentence-transformers' 20)."""
    seed: int = 0
    """Seeds torch and the order of the pairs and the negatives drawn."""


@dataclass(frozen=True)
class TrainingPair:
    """One training example: a query, one relevant document's text, and the texts the hard
    negatives are drawn from (its non-relevant candidates, best first)."""

    query: str
    positive: str
    candidates: tuple[str, ...] = ()


def fine_tune(base: str | Path, pairs: Sequence[TrainingPair], out: str | Path,
              config: FineTuneConfig, *, device: str = "auto",
              record: dict[str, Any] | None = None,
              on_step: Callable[[int, int, float], None] | None = None) -> Path:
    """Fine-tune the sentence-transformers model in folder ``base`` on ``pairs`` on ``device``
    and save it to the folder ``out`` (made; it must not exist), with :data:`RECIPE_FILE`
    holding ``config``, ``record`` (what the caller wants kept: base model id, training set
    hash, ...), the versions that trained it and, off the CPU, the device.
    ``on_step(step, steps, loss)`` after every step (progress).

    ``ValueError`` for no pairs, or a pair without a candidate when ``hard_negatives`` > 0
    (nothing to draw from); :class:`~aiblox.embedding.device.DeviceError` (a ``ValueError``)
    for a device that is not there. Needs torch and sentence-transformers
    (``aiblox[embeddings]``)."""
    if not pairs:
        raise ValueError("fine-tuning needs at least one (query, relevant document) pair")
    if config.hard_negatives and any(not p.candidates for p in pairs):
        bad = next(p.query for p in pairs if not p.candidates)
        raise ValueError(f"hard_negatives = {config.hard_negatives} but the query {bad!r} has no "
                         f"non-relevant candidate to draw from: draw candidates deeper "
                         f"(negative_depth), or set hard_negatives = 0 (in-batch negatives "
                         f"only)")
    out = Path(out)
    if out.exists():
        raise ValueError(f"{out}: already exists (a fine-tuned model is never overwritten)")
    try:
        import torch
    except ImportError as exc:
        raise ImportError("fine-tuning needs torch: pip install 'aiblox[embeddings]'") from exc
    device = resolve_device(device)
    if device_class(device) == "cuda":  # cuBLAS is deterministic only with a fixed workspace
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

    was = (torch.are_deterministic_algorithms_enabled(),
           torch.is_deterministic_algorithms_warn_only_enabled())
    torch.use_deterministic_algorithms(True, warn_only=True)  # this call only: restored below
    try:
        return _train_and_save(torch, base, pairs, out, config, device, record, on_step)
    finally:
        torch.use_deterministic_algorithms(was[0], warn_only=was[1])


def _train_and_save(torch: Any, base: str | Path, pairs: Sequence[TrainingPair], out: Path,
                    config: FineTuneConfig, device: str, record: dict[str, Any] | None,
                    on_step: Callable[[int, int, float], None] | None) -> Path:
    torch.manual_seed(config.seed)  # every device's generator
    rng = random.Random(config.seed)
    model = load_sentence_transformer(base, device, "fine-tuning")
    model.train()
    order = list(pairs)
    per_epoch = -(-len(order) // config.batch_size)
    steps = config.epochs * per_epoch
    warm = int(config.warmup * steps)
    opt = torch.optim.AdamW(model.parameters(), lr=config.lr)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warm) if warm else 1.0)

    prepare = getattr(model, "preprocess", None) or model.tokenize  # renamed in 6.x

    def encode(texts: list[str]) -> Any:
        features = {k: (v.to(device) if hasattr(v, "to") else v)
                    for k, v in prepare(texts).items()}
        return torch.nn.functional.normalize(model(features)["sentence_embedding"], dim=-1)

    step = 0
    for _ in range(config.epochs):
        rng.shuffle(order)
        for start in range(0, len(order), config.batch_size):
            batch = order[start:start + config.batch_size]
            docs = [p.positive for p in batch]
            for p in batch:
                k = min(config.hard_negatives, len(p.candidates))
                docs += rng.sample(p.candidates, k)
            scores = encode([p.query for p in batch]) @ encode(docs).T * config.scale
            loss = torch.nn.functional.cross_entropy(
                scores, torch.arange(len(batch), device=scores.device))
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            step += 1
            if on_step is not None:
                on_step(step, steps, float(loss.item()))
    model.eval()
    return save_trained(model, out, {"config": config.model_dump(mode="json"),
                                     "pairs": len(pairs), "steps": steps,
                                     "record": record or {}}, device)


def save_trained(model: Any, out: Path, recipe: dict[str, Any], device: str) -> Path:
    """Save a trained sentence-transformers model (a ``SentenceTransformer`` or a
    ``CrossEncoder``) to ``out`` as a whole or not at all: into a temporary sibling folder with
    ``recipe`` (plus the torch and sentence-transformers versions, and the device when it is
    not the CPU) as :data:`RECIPE_FILE`, then renamed; a failure leaves nothing behind."""
    import torch

    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    try:
        import sentence_transformers

        model.save(str(tmp), create_model_card=False)
        recipe = {**recipe, "versions": {"torch": torch.__version__,
                                         "sentence_transformers":
                                             sentence_transformers.__version__}}
        if device_class(device) != "cpu":  # a CPU-trained folder stays byte for byte as it was
            recipe["device"] = describe_device(device)
        (tmp / RECIPE_FILE).write_text(json.dumps(recipe, indent=2, sort_keys=True) + "\n",
                                       encoding="utf-8")
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out
