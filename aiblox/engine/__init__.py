"""The stage engine: stage kinds by name, composable retrieval pipelines, and (as it grows)
the keys, cache, manifests and scoring every evaluation goes through.

==================  ==========================================================================
module              what it is for
==================  ==========================================================================
``registry``        stage kinds by name: what each takes and gives, its config, its version
``algebra``         pipelines: :class:`Stage`, ``>>`` then, ``+`` fuse, ``%`` cut-off
``expression``      a spec's ``pipeline`` expression parsed into a pipeline
``builtin``         the kinds the engine plans itself (bm25, dense, retrieve, fuse, identity)
==================  ==========================================================================
"""

from aiblox.engine.algebra import Cutoff, Fuse, Pipeline, PipelineError, Stage, Then
from aiblox.engine.expression import parse_pipeline
from aiblox.engine.registry import (
    StageKind,
    StageKindError,
    get_stage_kind,
    register_stage,
    stage_kinds,
)

__all__ = [
    "Cutoff",
    "Fuse",
    "Pipeline",
    "PipelineError",
    "Stage",
    "StageKind",
    "StageKindError",
    "Then",
    "get_stage_kind",
    "parse_pipeline",
    "register_stage",
    "stage_kinds",
]
