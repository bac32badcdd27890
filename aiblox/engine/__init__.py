"""The stage engine: stage kinds by name, composable retrieval pipelines, and (as it grows)
the keys, cache, manifests and scoring every evaluation goes through.

==================  ==========================================================================
module              what it is for
==================  ==========================================================================
``registry``        stage kinds by name: what each takes and gives, its config, its version
``algebra``         pipelines: :class:`Stage`, ``>>`` then, ``+`` fuse, ``%`` cut-off
``expression``      a spec's ``pipeline`` expression parsed into a pipeline
``builtin``         the kinds the engine plans itself (bm25, dense, retrieve, fuse, identity)
``data``            what flows between stages: :class:`Queries`, :class:`Run`
``plan``            a pipeline applied to a split's topics, stage by stage, keyed and cached
``retrieval``       bm25 and dense after feedback; :class:`StageContext`
==================  ==========================================================================
"""

from aiblox.engine.algebra import Cutoff, Fuse, Pipeline, PipelineError, Stage, Then
from aiblox.engine.data import Queries, Run
from aiblox.engine.expression import parse_pipeline
from aiblox.engine.plan import StageInputs
from aiblox.engine.registry import (
    StageKind,
    StageKindError,
    get_stage_kind,
    register_stage,
    stage_kinds,
)
from aiblox.engine.retrieval import StageContext

__all__ = [
    "Cutoff",
    "Fuse",
    "Pipeline",
    "PipelineError",
    "Queries",
    "Run",
    "Stage",
    "StageContext",
    "StageInputs",
    "StageKind",
    "StageKindError",
    "Then",
    "get_stage_kind",
    "parse_pipeline",
    "register_stage",
    "stage_kinds",
]
