"""The spec tables that train a model before any point: ``[finetune]`` (the embedder,
:mod:`aiblox.sweep.finetune`) and ``[finetune_reranker]`` (a cross-encoder a ``cross_encoder``
stage names with ``model = "finetune"``, :mod:`aiblox.sweep.finetune_reranker`), and the checks
made when the spec loads."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import ConfigDict

from aiblox.embedding.cross_encoder_finetune import RerankerConfig
from aiblox.embedding.finetune import FineTuneConfig
from aiblox.engine.algebra import Pipeline

__all__ = ["FineTuneSpec", "RerankerFineTuneSpec", "check_finetune_reranker"]


class FineTuneSpec(FineTuneConfig):
    """``[finetune]`` of a sweep spec: the recipe and the split whose queries are trained on."""

    model_config = ConfigDict(strict=True)  # as the rest of a spec: no true for 1

    split: str
    """The split trained on (a file split such as ``train`` or a derived one such as
    ``train:1/2``), less every query of the sweep's tune and report splits."""

    def recipe(self) -> FineTuneConfig:
        """The recipe alone (no split)."""
        return FineTuneConfig(**self.model_dump(exclude={"split"}))


class RerankerFineTuneSpec(RerankerConfig):
    """``[finetune_reranker]`` of a sweep spec: a cross-encoder trained on the judged queries of
    a split the sweep does not score (:mod:`aiblox.sweep.finetune_reranker`), used by a
    ``cross_encoder`` stage with ``model = "finetune"``."""

    model_config = ConfigDict(strict=True)

    split: str
    """The split trained on, less every query of the sweep's tune and report splits."""

    def recipe(self) -> RerankerConfig:
        """The recipe alone (no split)."""
        return RerankerConfig(**self.model_dump(exclude={"split"}))


def check_finetune_reranker(ft: RerankerFineTuneSpec | None, splits: Sequence[str],
                            pipelines: Sequence[Pipeline | None]) -> None:
    """``[finetune_reranker]`` trains on a split the sweep does not score, from a model there
    is, and is used by a ``cross_encoder`` stage (``model = "finetune"``), which needs it."""
    stages = [s for p in pipelines if p is not None for s in p.stages()
              if s.kind == "cross_encoder" and s.param_dict().get("model") == "finetune"]
    uses = bool(stages)
    if ft is None:
        if uses:
            raise ValueError("finetune_reranker: a cross_encoder stage has model = "
                             "\"finetune\", and nothing trains it: add [finetune_reranker] "
                             "(split = \"train\", ...)")
        return
    from aiblox.data import parse_split
    from aiblox.embedding.sentence_transformers import model_folder

    try:
        parse_split(ft.split)
    except ValueError as exc:
        raise ValueError(f"finetune_reranker.split: {exc}") from None
    if ft.split in splits:
        raise ValueError(f"finetune_reranker.split = {ft.split!r}: a split the sweep scores: "
                         f"train on another split (its queries in tune_split or report_split "
                         f"are held out of training)")
    base = model_folder(ft.base)
    if base is None:
        raise ValueError(f"finetune_reranker.base: {ft.base!r} is not a model folder or an "
                         f"installed model package (minilm, a folder, a package)")
    from aiblox.embedding.cross_encoder import check_max_length

    # the trained model reads what its base reads: pairs longer would fail once trained
    check_max_length(base, ft.max_length, "finetune_reranker.max_length")
    for stage in stages:
        try:
            length = getattr(stage.config(), "max_length", None)
        except Exception:  # noqa: BLE001 - a stage's bad settings are refused by its own check
            continue
        if isinstance(length, int):
            check_max_length(base, length, f"stages.{stage.name}.max_length")
    if not uses:
        raise ValueError("finetune_reranker: no cross_encoder stage uses it (set "
                         "model = \"finetune\" in [stages.cross_encoder])")
