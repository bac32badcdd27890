"""Fusion of ranked lists: RRF, normalised linear blends and the HybridScorer (pure Python),
and :class:`BatchFusion`, the same fusion for many queries at once (numpy and compiled kernels,
:mod:`aiblox.fusion.kernels`), which a sweep uses."""

from aiblox.fusion.batch import BatchFusion, FusedArrays
from aiblox.fusion.hybrid import HybridScorer
from aiblox.fusion.linear import MISSING_POLICIES, linear
from aiblox.fusion.normalize import NORMALIZERS, get_normalizer, register_normalizer
from aiblox.fusion.rrf import rrf
from aiblox.fusion.types import FusedHit, RankedList, rank_sorted

__all__ = [
    "BatchFusion",
    "FusedArrays",
    "FusedHit",
    "HybridScorer",
    "MISSING_POLICIES",
    "NORMALIZERS",
    "RankedList",
    "get_normalizer",
    "linear",
    "rank_sorted",
    "register_normalizer",
    "rrf",
]
