"""The search space of a model-based search (:mod:`aiblox.sweep.search`): the grid's points
as parameters an Optuna trial asks (:class:`SearchSpace`), each trial an ordinary grid point.

Every setting a point can differ in (the fusion method and its parameters, the full-text and
vector candidate depths, BM25's ``k1``, ``b``, ``method``, ``title_weight`` and ``title_b``, the
dense document score and its passages, chunking, the policy and each swept policy parameter;
with a retrieval pipeline, its shape (``pipeline``) and each parameter its stages set,
``<stage>.<parameter>``, :func:`aiblox.engine.algebra.settings`) is one parameter. TPE asks
them in that order among the points that agree with the values chosen before it; CMA-ES and the
Gaussian process ask every varying setting in every trial (``flat``).
A spec's validation reads it too (a numeric strategy needs a numeric axis)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from aiblox.engine.algebra import settings as pipeline_settings
from aiblox.hashing import sha256_hex

if TYPE_CHECKING:
    from aiblox.engine.settings import PipelinePoint

__all__ = ["SearchSpace"]


_SCORING = ("blend", "w_text", "normalize", "missing", "rrf_k")


_FTS = ("k1", "b", "method", "title_weight", "title_b")


_DENSE = ("doc_score", "passage_chunker", "passage_tokens")


_CHUNKING = ("chunker_id", "max_chunk_tokens", "overlap_tokens")


_DEPTH = ("top_k_chunks", "per_item_chunk_cap")


def _settings(pt: PipelinePoint) -> dict[str, Any]:
    """The settings a grid point can differ in, in the order they are asked."""
    p = pt.prefs
    out: dict[str, Any] = {k: getattr(p.scoring, k) for k in _SCORING}
    out["depth"] = p.fts.top_k  # the full-text depth (``depth`` or ``fts_depth`` axes)
    out["vector_depth"] = p.vector.top_k  # asked only where it varies apart from ``depth``
    out.update({k: getattr(p.fts, k) for k in _FTS})
    first = p.vector.doc_score == "first"  # passages play no part in "first"
    out.update({k: None if first and k != "doc_score" else getattr(p.vector, k)
                for k in _DENSE})
    out.update({k: getattr(p.chunking, k) for k in _CHUNKING})
    out.update({k: getattr(p, k) for k in _DEPTH})
    out["policy"] = pt.policy
    out.update({f"selection.{k}": v for k, v in sorted(pt.overrides.items())})
    if pt.pipeline is not None:  # its shape, then each stage parameter (numbers as numbers)
        out.update(pipeline_settings(pt.pipeline))
    return out


def _numeric(values: Sequence[Any]) -> bool:
    return all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)


def _choice(v: Any) -> Any:
    """A value as an Optuna categorical choice (primitives as they are, others by repr)."""
    return v if v is None or isinstance(v, str | int | float | bool) else repr(v)


class SearchSpace:
    """The grid's points as a space of parameters; :meth:`point` maps a trial to a point.

    ``flat=False`` (TPE): parameters asked conditionally, among the points that agree with the
    values chosen before. ``flat=True`` (CMA-ES, GP): every varying setting asked in every
    trial over all its values; ``categorical_as_index`` asks a categorical setting as an integer
    index in grid order (CMA-ES models numbers only)."""

    def __init__(self, points: Sequence[PipelinePoint], *, flat: bool = False,
                 categorical_as_index: bool = False) -> None:
        self.points = list(points)
        self.flat = flat
        self.categorical_as_index = categorical_as_index
        self._settings = [_settings(p) for p in self.points]
        names: dict[str, None] = {}
        for s in self._settings:
            names.update(dict.fromkeys(s))
        self.names = list(names)
        self._all = {n: self._distinct(range(len(self.points)), n) for n in self.names}

    def _distinct(self, idx: Sequence[int], name: str) -> list[Any]:
        seen: dict[str, Any] = {}
        for i in idx:
            v = self._settings[i].get(name)
            seen.setdefault(repr(v), v)
        return list(seen.values())

    @property
    def dimensions(self) -> list[str]:
        """Settings that vary across the grid (an empty list: nothing to search)."""
        return [n for n in self.names if len(self._all[n]) > 1]

    @property
    def numeric_dimensions(self) -> list[str]:
        """The :attr:`dimensions` whose values are all numbers."""
        return [n for n in self.dimensions if _numeric(self._all[n])]

    def _ask(self, trial: Any, label: str, values: list[Any]) -> str:
        """Ask one setting over ``values``; the ``repr`` of the value chosen."""
        if _numeric(values):
            ordered = sorted(values)
            return repr(ordered[trial.suggest_int(label, 0, len(ordered) - 1)])
        if self.categorical_as_index:
            return repr(values[trial.suggest_int(label, 0, len(values) - 1)])
        got = trial.suggest_categorical(label, [_choice(v) for v in values])
        return next(repr(v) for v in values if _choice(v) == got)

    def point(self, trial: Any) -> int:
        """The index of the grid point a trial (an Optuna ``Trial`` or ``FixedTrial``) picks."""
        idx = list(range(len(self.points)))
        if self.flat:
            chosen = {name: self._ask(trial, name, self._all[name]) for name in self.dimensions}
            for name, key in chosen.items():
                kept = [i for i in idx if repr(self._settings[i].get(name)) == key]
                idx = kept or idx  # a value these points lack: the setting does not apply
        else:
            for name in self.names:
                values = self._distinct(idx, name)
                if len(values) < 2:
                    continue
                full = self._all[name]
                label = name if len(values) == len(full) else (
                    f"{name}|{sha256_hex(sorted(repr(v) for v in values))[:8]}")
                key = self._ask(trial, label, values)
                idx = [i for i in idx if repr(self._settings[i].get(name)) == key]
        if len(idx) > 1:  # settings not listed above tell them apart: choose by position
            idx = [idx[trial.suggest_int("point|" + sha256_hex(idx)[:8], 0, len(idx) - 1)]]
        return idx[0]
