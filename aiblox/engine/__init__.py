"""The stage engine every evaluation goes through: stage kinds by name and composable retrieval
pipelines; the keyed tasks, their cache and manifests; a dataset's workspace; the scoring of a
point, of a one-shot evaluation and of chunks.

==================  ==========================================================================
module              what it is for
==================  ==========================================================================
``registry``        stage kinds by name: what each takes and gives, its config, its version
``algebra``         pipelines: :class:`Stage`, ``>>`` then, ``+`` fuse (:func:`fuse`), ``%`` cut-off
``expression``      a spec's ``pipeline`` expression parsed into a pipeline
``builtin``         the kinds the engine plans itself (bm25, dense, retrieve, fuse, identity)
``data``            what flows between stages: :class:`Queries`, :class:`Run`
``plan``            a pipeline applied to a split's topics, stage by stage, keyed and cached
``retrieval``       bm25 and dense after feedback; :class:`StageContext`
``task``            a keyed task (name, version, config, inputs, compute), the table of stage
                    versions, stage keys, the record a manifest keeps
``configs``         the config of every stage of a point (what decides its output)
``cache``           the on-disk stage cache (checked reads, atomic writes)
``compute``         what each stage of a point computes
``outputs``         stored outputs read back (fused runs, per-query values, evidence)
``workspace``       :func:`open_workspace`: a dataset's store, synced, with embedder and
                    retrievers (every command, the sweep, verify and the notebooks)
``settings``        what a point is: its settings, config hash, label; the ranking of points
``context``         one run's state: workspace, signals, indexes, scorers (:class:`RunContext`)
``point``           the chain of stages of one point on one split
``manifest``        determinism manifests of points
``evaluate``        :func:`evaluate_retrieval`: one configuration scored on one split
``chunk_eval``      :func:`evaluate_chunks`: which chunking serves evidence best
==================  ==========================================================================
"""

from aiblox.engine.algebra import Cutoff, Fuse, Pipeline, PipelineError, Stage, Then, fuse
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
    "fuse",
    "get_stage_kind",
    "parse_pipeline",
    "register_stage",
    "stage_kinds",
]
