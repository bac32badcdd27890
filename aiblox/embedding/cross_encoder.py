"""Any sentence-transformers ``CrossEncoder`` given by a local folder or an installed package,
loaded offline, identified by its files' hashes, scoring (query, document) pairs through a
persistent cache.

A cross-encoder reads a query and a document together and gives one relevance score (a
sequence-classification head with one output over BERT-like layers: MS MARCO's MiniLM
rerankers, BGE's rerankers, or the one ``[finetune_reranker]`` trains from MiniLM). The folder
is found as embedders' are (:func:`aiblox.embedding.sentence_transformers.find_model`: the
folder itself, or an installed package's ``get_model_path()`` or ``model`` folder), and its id is
``ce:<folder name>@<16 hex>-len<max_length>-cutdoc``, the hex being the sha256 of every file's
path and sha256 (:func:`~aiblox.embedding.sentence_transformers.model_digest`), with the device
class off the CPU (``...+cuda``: :mod:`aiblox.embedding.device`).

A pair longer than ``max_length`` word pieces loses the end of its document: the query is kept
whole (``only_second``), and cut too (``longest_first``) only when it alone leaves no room for
the document (:func:`pair_features`). ``-cutdoc`` in the id says so: scores cached when both
texts were cut alike (ids without it) are never served for these. ``max_length`` beyond what
the model reads (its position embeddings: :func:`position_limit`) is refused before any work
(:func:`check_max_length`).

Scores are the head's raw output (a logit: no sigmoid), each pair's computed once per model id:
the cache is the store's embedding cache (:class:`~aiblox.embedding.cache.EmbeddingCache`,
vectors of any length by ``(model id, text sha256)``) holding one-element vectors under the
cross-encoder's id, keyed by the sha256 of ``query + "\\0" + document`` text. Content-keyed,
so another pipeline, point or sweep over the same store scores no pair twice. A cached score
that is not one finite value (a damaged row: :func:`~aiblox.embedding.cache.damaged_vectors`)
is computed again and replaced, never served.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from aiblox.embedding.cache import CacheReadOnly, damaged_vectors, not_kept
from aiblox.embedding.device import resolve_device, with_device
from aiblox.embedding.sentence_transformers import find_model, model_digest, quiet_transformers
from aiblox.hashing import sha256_text

__all__ = ["CrossEncoderScorer", "check_max_length", "cross_encoder_folder", "cross_encoder_id",
           "not_a_reranker", "pair_features", "pair_hash", "position_limit"]

TRUNCATION = "cutdoc"
"""How a pair too long is cut (only the document, :func:`pair_features`), in the model id."""

_OFFSET_POSITIONS = {"roberta": 2, "xlm-roberta": 2, "camembert": 2, "xlm-roberta-xl": 2,
                     "data2vec-text": 2, "longformer": 2}
"""Model types whose positions start after the padding index (RoBERTa's 514 read 512)."""


def not_a_reranker(folder: Path) -> str | None:
    """Why the model folder ``folder`` is not a relevance cross-encoder (one line), or None.

    A cross-encoder's ``config.json`` names a ``...ForSequenceClassification`` architecture with
    one output (``num_labels`` 1, as sentence-transformers' ``CrossEncoder(..., num_labels=1)``
    saves it); a bi-encoder (``BertModel`` with a pooling module: an embedder) or a classifier
    of several labels (NLI) is not one."""
    try:
        cfg = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return f"{folder}: no readable config.json (not a transformers model folder)"
    archs = [str(a) for a in cfg.get("architectures") or []]
    if not any(a.endswith("ForSequenceClassification") for a in archs):
        what = ("a sentence-transformers bi-encoder (an embedder: modules.json with a pooling "
                "module)" if (folder / "modules.json").is_file() else "no classification head")
        return (f"{folder}: not a cross-encoder: config.json architectures "
                f"{', '.join(archs) or 'none'}, {what}; a reranker needs a "
                f"...ForSequenceClassification head with one output")
    # transformers writes neither key at its default of two labels (PretrainedConfig's
    # num_labels 2): a folder without them is a two-way classifier, not one output
    labels = cfg.get("num_labels") or len(cfg.get("id2label") or {}) or 2
    if labels != 1:
        return (f"{folder}: a classifier of {labels} labels ({', '.join(archs)}), not a "
                f"relevance cross-encoder (one output, num_labels 1)")
    return None


def cross_encoder_folder(name: str) -> Path:
    """The cross-encoder folder ``name`` stands for (a folder or an installed package,
    :func:`~aiblox.embedding.sentence_transformers.find_model`); ``ValueError`` in one line
    when there is none or it is not a cross-encoder (:func:`not_a_reranker`)."""
    folder = find_model(name)
    if folder is None:
        raise ValueError(f"model {name!r}: no such model folder or installed model package")
    problem = not_a_reranker(folder)
    if problem is not None:
        raise ValueError(problem)
    return folder


def position_limit(folder: str | Path) -> tuple[int, str] | None:
    """``(word pieces, where it is said)``: the most the model in ``folder`` reads at once (its
    ``config.json`` ``max_position_embeddings``, less RoBERTa's padding offset; without one,
    its tokenizer's ``model_max_length``); None when nothing bounds it (relative positions)."""
    folder = Path(folder)

    def read(name: str) -> dict[str, Any]:
        try:
            value = json.loads((folder / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return value if isinstance(value, dict) else {}

    cfg = read("config.json")
    if cfg.get("position_biased_input") is False:  # DeBERTa-v2's relative positions only
        return None
    positions = cfg.get("max_position_embeddings")
    if isinstance(positions, int) and positions > 0:
        offset = _OFFSET_POSITIONS.get(str(cfg.get("model_type")), 0)
        return positions - offset, "config.json max_position_embeddings" + (
            f" {positions} less {offset}" if offset else "")
    longest = read("tokenizer_config.json").get("model_max_length")
    if isinstance(longest, int) and 0 < longest < 1_000_000:  # (1e30: none set)
        return longest, "tokenizer_config.json model_max_length"
    return None


def check_max_length(folder: str | Path, max_length: int, what: str = "max_length") -> None:
    """``ValueError`` (one line) when ``max_length`` word pieces are more than the model in
    ``folder`` reads (:func:`position_limit`): its position embeddings would not reach."""
    limit = position_limit(folder)
    if limit is not None and max_length > limit[0]:
        raise ValueError(f"{what} = {max_length} but the model {folder} reads at most "
                         f"{limit[0]} word pieces ({limit[1]}): lower {what}")


def pair_features(tok: Any, queries: Sequence[str], docs: Sequence[str], max_length: int) -> Any:
    """The tokenizer ``tok``'s padded tensors of the (query, document) pairs, each pair at most
    ``max_length`` word pieces: the document's end cut first, the query whole
    (``only_second``), unless the query alone leaves the document no room (then both are cut,
    ``longest_first``)."""
    room = max_length - tok.num_special_tokens_to_add(pair=True)
    lengths = [len(ids) for ids in tok(list(queries), add_special_tokens=False)["input_ids"]]
    rows: list[dict[str, Any]] = [{} for _ in queries]
    for cut, keep in (("only_second", True), ("longest_first", False)):
        at = [i for i, n in enumerate(lengths) if (n < room) == keep]
        if not at:
            continue
        enc = tok([queries[i] for i in at], [docs[i] for i in at], truncation=cut,
                  max_length=max_length)
        for j, i in enumerate(at):
            rows[i] = {k: enc[k][j] for k in enc}
    return tok.pad(rows, padding=True, return_tensors="pt")


def _base_id(folder: Path, max_length: int) -> str:
    name = folder.name if folder.name != "model" else folder.parent.name
    return f"ce:{name}@{model_digest(folder)[:16]}-len{max_length}-{TRUNCATION}"


def cross_encoder_id(folder: str | Path, max_length: int, device: str = "cpu") -> str:
    """``ce:<name>@<16 hex of its files>-len<max_length>-cutdoc``, with the class of ``device``
    (a resolved device) off the CPU."""
    return with_device(_base_id(Path(folder), max_length), device)


def pair_hash(query: str, text: str) -> str:
    """The cache key of a (query, document text) pair under a model id."""
    return sha256_text(f"{query}\0{text}")


class CrossEncoderScorer:
    """Scores (query, document text) pairs with the cross-encoder in ``folder`` (checked:
    :func:`not_a_reranker`, :func:`check_max_length`), each truncated to ``max_length`` word
    pieces together (the document's end first: :func:`pair_features`), in batches
    of ``batch_size`` on ``device`` (``auto``: resolved when first needed). The model is loaded
    on the first pair the cache does not hold."""

    def __init__(self, folder: str | Path, max_length: int = 256, batch_size: int = 32,
                 device: str = "auto") -> None:
        self.folder = Path(folder)
        problem = not_a_reranker(self.folder)
        if problem is not None:
            raise ValueError(problem)
        check_max_length(self.folder, max_length)
        self.max_length = max_length
        self.batch_size = batch_size
        self.device_spec = device
        self._device: str | None = None
        self._model: Any = None
        self._tokenizer: Any = None
        self.computed = 0
        """Pairs scored by the model (not found in the cache) by this scorer."""
        self.cached = 0
        """Pairs found in the cache by this scorer."""

    @property
    def device(self) -> str:
        """The device the model runs on (resolved on first need)."""
        if self._device is None:
            self._device = resolve_device(self.device_spec, "device")
        return self._device

    @property
    def model_id(self) -> str:
        """The id scores are cached and stage keys made under (:func:`cross_encoder_id`)."""
        return cross_encoder_id(self.folder, self.max_length, self.device)

    def _load(self) -> tuple[Any, Any]:
        if self._model is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            try:
                from transformers import AutoModelForSequenceClassification, AutoTokenizer
            except ImportError as exc:
                raise ImportError("a cross-encoder needs transformers and torch: pip install "
                                  "'aiblox[embeddings]'") from exc
            quiet_transformers()
            self._tokenizer = AutoTokenizer.from_pretrained(str(self.folder))
            model = AutoModelForSequenceClassification.from_pretrained(str(self.folder))
            self._model = model.to(self.device).eval()
        return self._model, self._tokenizer

    def predict(self, pairs: Sequence[tuple[str, str]],
                on_batch: Callable[[int], None] | None = None) -> np.ndarray:
        """The raw scores of ``pairs`` (no cache), in order; ``on_batch(n)`` after each batch."""
        import torch

        model, tok = self._load()
        out = np.zeros(len(pairs), dtype=np.float32)
        with torch.inference_mode():
            for start in range(0, len(pairs), self.batch_size):
                batch = pairs[start:start + self.batch_size]
                feats = pair_features(tok, [q for q, _ in batch], [t for _, t in batch],
                                      self.max_length).to(self.device)
                logits = model(**feats).logits.reshape(-1)
                out[start:start + len(batch)] = logits.float().cpu().numpy()
                if on_batch is not None:
                    on_batch(len(batch))
        return out

    def score(self, pairs: Sequence[tuple[str, str]], cache: Any = None,
              on_batch: Callable[[int], None] | None = None,
              on_todo: Callable[[int], None] | None = None) -> np.ndarray:
        """The scores of ``pairs`` in order, from ``cache`` (an
        :class:`~aiblox.embedding.cache.EmbeddingCache`, e.g. the store) where it holds them;
        the others computed (once each, in order of first appearance) and stored.
        ``on_todo(n)`` tells how many pairs will be computed, before the first is."""
        hashes = [pair_hash(q, t) for q, t in pairs]
        unique = list(dict.fromkeys(hashes))
        found: dict[str, float] = {}
        damaged: set[str] = set()
        if cache is not None and unique:
            held = cache.get_embeddings(self.model_id, unique)
            damaged = damaged_vectors(held, 1)
            found = {h: float(np.ravel(v)[0]) for h, v in held.items() if h not in damaged}
            if damaged:
                warnings.warn(f"embedding cache: {len(damaged)} cached {self.model_id} "
                              f"score(s) damaged (not one finite value); computed again and "
                              f"replaced", stacklevel=2)
        todo = [h for h in unique if h not in found]
        self.cached += len(unique) - len(todo)
        self.computed += len(todo)
        if on_todo is not None:
            on_todo(len(todo))
        if todo:
            pair_of = dict(zip(hashes, pairs, strict=True))
            step = max(self.batch_size * 8, 256)  # stored as it goes: a killed run keeps them
            for start in range(0, len(todo), step):
                chunk = todo[start:start + step]
                values = self.predict([pair_of[h] for h in chunk], on_batch)
                rows = [(h, np.asarray([v], dtype=np.float32))
                        for h, v in zip(chunk, values.tolist(), strict=True)]
                if cache is not None:
                    try:
                        cache.put_embeddings(self.model_id,
                                             [r for r in rows if r[0] not in damaged])
                        cache.put_embeddings(self.model_id, [r for r in rows if r[0] in damaged],
                                             replace=True)
                    except CacheReadOnly as exc:  # a read-only store: scores not kept
                        not_kept(exc, "scores")
                        cache = None
                found.update((h, float(r[0])) for h, r in rows)
        return np.asarray([found[h] for h in hashes], dtype=np.float32)
