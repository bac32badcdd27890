"""``cross_encoder``: a sentence-transformers cross-encoder rescoring the top ``top_n`` of any run.

::

    pipeline = "bm25 + dense >> cross_encoder"
    [stages.cross_encoder]
    model = "/models/ms-marco-MiniLM-L-6-v2"   # a folder, an installed package, or "finetune"
    top_n = 30
    [grid.stages.cross_encoder]
    alpha = [0.5, 0.7, 1.0]                     # the reranker's share of the final score

Each query's top ``top_n`` documents (its query text, as the split gives it, against the
document's title and text, the text its vector is computed from) are scored by the model
(:class:`~aiblox.embedding.cross_encoder.CrossEncoderScorer`: raw logits, every pair cached in
the store by model id and content, so another point, pipeline or sweep scores no pair twice)
and reordered by

    ``alpha * norm(cross-encoder score) + (1 - alpha) * norm(incoming score)``

``norm`` being ``minmax`` (default) or ``zscore`` over the query's ``top_n`` (:mod:`aiblox.fusion.
normalize`): ``alpha = 1`` is the cross-encoder alone, lower values interpolate with the stage
before (BEIR's and Pyserini's "BM25 + CE" is ``alpha = 1``; the interpolated form is Nogueira
and Cho's). Ties go to the smaller document id. The documents below ``top_n`` follow in their
incoming order (``rest = "after"``, the default: recall at the run's depth is unchanged), scored
below every reranked one (the lowest reranked score minus one, minus their rank below it), or
are dropped (``rest = "drop"``).

``model = "finetune"`` is the cross-encoder a spec's ``[finetune_reranker]`` trains
(:mod:`aiblox.sweep.finetune_reranker`): once it is trained the sweep names it
``finetune:<folder name>@<16 hex of its files' sha256>``
(:func:`~aiblox.embedding.sentence_transformers.trained_ref`, as a ``[finetune]`` embedder is
named), and the folder that reference stands for is known to the process
(:func:`~aiblox.embedding.sentence_transformers.use_trained`; a sweep's settings carry it to every
worker, a point's manifest to ``aiblox eval verify``), never written in a pipeline:
a point's config hash and label say what the spec said and which model it was, not where the
sweep's cache lies.

The stage's key holds the model's id (its files' sha256, ``max_length``, the device class off
the CPU), never its path, with ``top_n``, ``alpha``, ``normalize``, ``rest`` and
``max_length``; ``batch_size`` and ``device`` change no score's meaning and stay out of it
(their last bits can move: a batch is padded to its longest pair, as the README's Determinism
section says of MiniLM's vectors).
Refused before any work (one line): a model that is not there or not a cross-encoder (a
bi-encoder folder such as MiniLM's), ``max_length`` beyond what the model reads (its position
embeddings: :func:`~aiblox.embedding.cross_encoder.check_max_length`; for ``finetune``, the
spec's ``[finetune_reranker]`` check compares it with the base model's), and ``top_n`` beyond
the incoming run's depth. A pair longer than ``max_length`` loses its document's end, the query
kept whole unless it alone leaves no room (:func:`~aiblox.embedding.cross_encoder.pair_features`;
the model id, and so the key and the cached pair scores, says ``-cutdoc``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
)

from aiblox.embedding.device import DeviceError, parse_device, resolve_device
from aiblox.embedding.sentence_transformers import (
    FINETUNED,
    is_trained_ref,
    trained_folder,
    unknown_trained,
)
from aiblox.engine.data import Run
from aiblox.engine.registry import StageFacts, register_stage
from aiblox.fusion.normalize import minmax, zscore
from aiblox.progress import progress_bar

__all__ = ["FINETUNED", "CrossEncoderConfig", "combine", "cross_encoder"]


class CrossEncoderConfig(BaseModel):
    """``cross_encoder``: a cross-encoder rescoring the top of a run."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)

    model: str = Field(min_length=1)
    """A folder holding a sentence-transformers ``CrossEncoder`` (or any transformers
    sequence-classification model with one output), an installed package that ships one, or
    ``"finetune"``: the spec's ``[finetune_reranker]`` model."""
    top_n: int = Field(default=50, ge=1)
    """Documents rescored per query: the top ``top_n`` of the incoming run."""
    alpha: float = Field(default=1.0, ge=0.0, le=1.0)
    """The cross-encoder's weight in the final score; ``1 - alpha`` the incoming run's (both
    normalised over the query's ``top_n``). 1: the cross-encoder alone."""
    normalize: Literal["minmax", "zscore"] = "minmax"
    """How both scores are put on one scale before they are mixed."""
    rest: Literal["after", "drop"] = "after"
    """The documents below ``top_n``: kept after the reranked ones, in their order, or dropped."""
    max_length: int = Field(default=256, ge=16, le=8192)
    """Word pieces of query and document together, at most what the model reads (its position
    embeddings); a longer pair loses its document's end, the query kept whole unless it alone
    leaves the document no room (then both are cut)."""
    batch_size: int = Field(default=32, ge=1, le=4096)
    """Pairs per forward pass (not part of the key)."""
    device: str = "auto"
    """Where the model runs: ``auto`` (the first GPU torch sees, else the CPU), ``cpu``,
    ``cuda``, ``cuda:N``, ``mps``; its class (not the index) is part of the model id."""

    @field_validator("device")
    @classmethod
    def _device_form(cls, v: str) -> str:
        return parse_device(v, "device")

    @model_serializer(mode="wrap")
    def _key_form(self, handler: SerializerFunctionWrapHandler,
                  info: SerializationInfo) -> dict[str, Any]:
        """In JSON mode (the stage key's form) the model is its id, not its path, and the
        settings that change no score (``batch_size``, ``device``) are left out."""
        data: dict[str, Any] = handler(self)
        if info.mode_is_json():
            data["model"] = self.model_id()
            data.pop("batch_size", None)
            data.pop("device", None)
        return data

    def folder(self) -> Any:
        """The model's folder (:func:`~aiblox.embedding.cross_encoder.cross_encoder_folder`);
        ``ValueError`` (one line) when it is missing, not a cross-encoder, or ``finetune`` left
        unresolved."""
        from aiblox.embedding.cross_encoder import cross_encoder_folder

        if self.model == FINETUNED:
            raise ValueError(f"model = {FINETUNED!r} is the cross-encoder a spec's "
                             f"[finetune_reranker] trains: add that table to the spec, or name "
                             f"a cross-encoder folder or installed package")
        if is_trained_ref(self.model):
            found = trained_folder(self.model)
            if found is None:
                raise ValueError(f"model {unknown_trained(self.model)}")
            return cross_encoder_folder(str(found))
        return cross_encoder_folder(self.model)

    def model_id(self) -> str:
        """The model's id on the resolved device (see the module doc)."""
        from aiblox.embedding.cross_encoder import cross_encoder_id

        try:
            device = resolve_device(self.device, "device")
        except DeviceError as exc:  # named by the stage, as its other settings' errors are
            raise DeviceError(f"stage cross_encoder: {exc}") from None
        return cross_encoder_id(self.folder(), self.max_length, device)


def _check(cfg: CrossEncoderConfig, facts: StageFacts) -> int | None:
    """``top_n`` within the incoming run's depth; the model there, a cross-encoder, and
    reading pairs of ``max_length`` (but ``finetune``, which a sweep trains after this check
    and before any point)."""
    from aiblox.embedding.cross_encoder import check_max_length

    if facts.depth is not None and cfg.top_n > facts.depth:
        raise ValueError(f"top_n = {cfg.top_n} but its input run holds at most {facts.depth} "
                         f"documents per query (cut the run deeper, or lower top_n)")
    if cfg.model != FINETUNED:
        check_max_length(cfg.folder(), cfg.max_length)
    if cfg.rest == "drop":
        return cfg.top_n if facts.depth is None else min(cfg.top_n, facts.depth)
    return facts.depth


def combine(docs: tuple[str, ...], incoming: tuple[float, ...], ce: list[float],
            cfg: CrossEncoderConfig) -> list[tuple[str, float]]:
    """One query's reranked list: its first ``len(ce)`` documents by ``alpha`` times the
    normalised cross-encoder score plus ``1 - alpha`` times the normalised incoming score
    (ties by document id), then, with ``rest = "after"``, the others in their order."""
    n = len(ce)
    norm = minmax if cfg.normalize == "minmax" else zscore
    a = cfg.alpha
    mixed = norm(list(ce)) if a == 1.0 else [
        a * c + (1.0 - a) * p for c, p in zip(norm(list(ce)), norm(list(incoming[:n])),
                                              strict=True)]
    top = sorted(zip(docs[:n], mixed, strict=True), key=lambda h: (-h[1], h[0]))
    if cfg.rest == "drop" or n >= len(docs):
        return top
    floor = min(mixed) - 1.0
    return top + [(d, floor - i) for i, d in enumerate(docs[n:])]


# version 2: a z-score (sigmoid) interpolation of a list of equal scores is 0 (0.5) whatever
# their value (aiblox.fusion.normalize.zscore: 0.1 thrice gave +-1 through its rounded mean)
@register_stage("cross_encoder", version="2", takes="run", gives="run",
                config=CrossEncoderConfig, reads=["items"], check=_check,
                doc="a cross-encoder rescoring the top top_n of a run (alpha: its share)")
def cross_encoder(cfg: CrossEncoderConfig, inputs: Any, ctx: Any) -> Run:
    """Rescore the top ``top_n`` of each query of the incoming run (see the module doc)."""
    from aiblox.embedding.cross_encoder import CrossEncoderScorer

    run: Run = inputs.run
    text_of = inputs.topics.text_of()
    tops = [docs[:cfg.top_n] for docs in run.docs]
    wanted = sorted({d for docs in tops for d in docs})
    items = ctx.store.get_items(wanted) if wanted else {}
    missing = [d for d in wanted if d not in items]
    if missing:
        raise ValueError(f"cross_encoder: {len(missing)} document(s) of the run are not in the "
                         f"store (e.g. {missing[0]!r})")
    pairs = [(text_of[q], items[d].embedding_text)
             for q, docs in zip(run.qids, tops, strict=True) for d in docs]
    scorer = CrossEncoderScorer(cfg.folder(), cfg.max_length, cfg.batch_size, cfg.device)
    bars: list[Any] = []

    def todo(n: int) -> None:
        bars.append(progress_bar(n, f"cross_encoder: {n} of {len(pairs)} pairs to score "
                                    f"({scorer.model_id} on {scorer.device})", unit="pair",
                                 enabled=ctx.progress and n > 0))

    try:
        scores = scorer.score(pairs, cache=ctx.store, on_todo=todo,
                              on_batch=lambda n: bars[-1].update(n)).tolist()
    finally:
        for bar in bars:
            bar.close()
    lists, start = [], 0
    for docs, incoming, top in zip(run.docs, run.scores, tops, strict=True):
        lists.append(combine(docs, incoming, scores[start:start + len(top)], cfg))
        start += len(top)
    return Run.from_lists(run.qids, lists)
