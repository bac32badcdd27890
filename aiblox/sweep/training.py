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

__all__ = ["FineTuneSpec", "RerankerFineTuneSpec", "check_finetune_reranker",
           "check_training_split"]


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
    from aiblox.embedding.sentence_transformers import model_folder

    check_training_split("finetune_reranker", ft.split, splits)
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


def check_training_split(table: str, split: str, splits: Sequence[str]) -> None:
    """``[<table>] split`` (``finetune``, ``finetune_reranker``): a split name, not one the sweep
    scores (``splits``), nor one whose every query the sweep scores, its queries being held out
    of training: ``test`` (or ``test:0/3``) while the sweep scores ``test:0/2`` and
    ``test:1/2`` (:func:`~aiblox.data.rules.held_out_by`). Whether a split the dataset lacks,
    or one the sweep's splits leave empty on its data, is checked against the dataset before
    the sweep starts (:func:`aiblox.sweep.finetune.check_training`)."""
    from aiblox.data import held_out_by, parse_split

    try:
        parse_split(split)
    except ValueError as exc:
        raise ValueError(f"{table}.split: {exc}") from None
    if split in splits:
        raise ValueError(f"{table}.split = {split!r}: a split the sweep scores: train on "
                         f"another split (its queries in tune_split or report_split are "
                         f"held out of training)")
    held = held_out_by(split, splits)
    if held:
        raise ValueError(f"{table}.split = {split!r}: every query of it is in the sweep's "
                         f"{' and '.join(held)}, held out of training, so none is left to "
                         f"train on: train on another split, or score only a part of this "
                         f"one")

