"""Sweep specs: a TOML file naming a dataset, its tune and report splits, a base pipeline config
and grid axes over fusion. Validated by pydantic; unknown keys are rejected, and errors name the
file and the field.

Expansion: ``blend`` picks which axes apply. Linear points take ``w_text`` (``w_vec`` is
``1 - w_text``, exactly), ``normalize`` and ``missing``; RRF points take ``rrf_k``. ``depth``
(candidates per signal before fusion) applies to both. An axis left out keeps the base value, so
no two points share a configuration.
"""

from __future__ import annotations

import tomllib
from decimal import Decimal
from itertools import product
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from aiblox.contracts.retrieval import RetrievalPrefs, ScoringConfig
from aiblox.eval.metrics import DEFAULT_METRICS
from aiblox.eval.sweep.grid import GridError, decimal_range, to_decimal
from aiblox.hashing import sha256_hex

__all__ = ["FusionGrid", "Steps", "SweepSpec", "SweepSpecError", "load_spec"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)


class SweepSpecError(ValueError):
    """A sweep spec that cannot be read or validated; the message names the file and field."""


class Steps(_Strict):
    """An exact numeric axis ``start, start + step, ..., stop`` (built in decimal arithmetic)."""

    start: float | str
    """First value (written as a number or a decimal string)."""
    stop: float | str
    """Last value, included; ``(stop - start) / step`` must be whole."""
    step: float | str
    """Step between values."""

    def values(self) -> list[float]:
        """The axis values, exactly: ``{start=0, stop=1, step=0.05}`` gives 21 values."""
        return decimal_range(self.start, self.stop, self.step)

    @model_validator(mode="after")
    def _check(self) -> Steps:
        try:
            self.values()
        except GridError as exc:
            raise ValueError(str(exc)) from exc
        return self


class FusionGrid(_Strict):
    """Grid axes over fusion; each axis is a list of values (numeric axes may be ``Steps``)."""

    blend: list[Literal["rrf", "linear"]] | None = None
    """Fusion methods to sweep; None: the base config's."""
    w_text: list[float] | Steps | None = None
    """Linear blend weight of the full-text signal; ``w_vec`` is ``1 - w_text`` exactly."""
    rrf_k: list[int] | Steps | None = None
    """RRF constants k."""
    normalize: list[Literal["minmax", "zscore", "sigmoid", "none"]] | None = None
    """Score normalisations for the linear blend."""
    missing: list[Literal["zero", "list_min"]] | None = None
    """Linear blend policy for a document absent from one list."""
    depth: list[int] | Steps | None = None
    """Candidates taken from each signal (full-text and vector ``top_k``) before fusion."""

    @field_validator("w_text")
    @classmethod
    def _weights_in_unit_interval(cls, v: list[float] | Steps | None) -> list[float] | Steps | None:
        values = v.values() if isinstance(v, Steps) else (v or [])
        bad = [w for w in values if not 0.0 <= w <= 1.0]
        if bad:
            raise ValueError(f"weights must lie in [0, 1], got {bad}")
        return v

    @field_validator("rrf_k", "depth")
    @classmethod
    def _whole_numbers(cls, v: list[int] | Steps | None) -> list[int] | Steps | None:
        if isinstance(v, Steps) and any(x != int(x) for x in v.values()):
            raise ValueError("steps must give whole numbers")
        return v

    @field_validator("blend", "w_text", "rrf_k", "normalize", "missing", "depth")
    @classmethod
    def _not_empty(cls, v: Any) -> Any:
        if isinstance(v, list) and not v:
            raise ValueError("an axis needs at least one value (leave it out to keep the base)")
        return v

    def axis(self, name: str) -> list[Any] | None:
        """Values of one axis (None when not swept), in the order written."""
        v = getattr(self, name)
        if isinstance(v, Steps):
            vals = v.values()
            return [int(x) for x in vals] if name in ("rrf_k", "depth") else vals
        return list(v) if v is not None else None


class SweepSpec(_Strict):
    """A sweep: what to score, on which splits, over which grid."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.\-]+$")
    """Sweep name; also the MLflow experiment name unless ``experiment`` is set."""
    description: str = ""
    """Free text for people."""
    experiment: str | None = None
    """MLflow experiment name; None: ``aiblox-sweep/<name>``."""
    dataset: str
    """Dataset name (looked up like ``aiblox eval``) or BEIR folder."""
    tune_split: str
    """Split the best configuration is chosen on."""
    report_split: str
    """Split the chosen configuration is reported on (never used for choosing)."""
    backend: Literal["duckdb", "postgres"] = "duckdb"
    """Store backend; ``postgres`` needs ``db`` to be a ``postgresql+psycopg://`` URL."""
    db: str | None = None
    """Store path or PostgreSQL URL; None: ``.aiblox/datasets/<dataset>.duckdb``."""
    embedder: str = "minilm"
    """Embedder name (``minilm``, ``hashing``)."""
    vectors: list[str] = Field(default_factory=list)
    """Precomputed vector files to import (default: found beside the dataset)."""
    metrics: list[str] = Field(default_factory=lambda: list(DEFAULT_METRICS))
    """ranx metric names scored at every point."""
    primary: str = "ndcg@10"
    """The metric the best configuration is chosen by (on the tune split)."""
    base: dict[str, Any] = Field(default_factory=dict)
    """Overrides of :class:`RetrievalPrefs` (without ``query_text``) shared by every point."""
    grid: FusionGrid = Field(default_factory=FusionGrid)
    """Axes swept over fusion."""
    baseline: dict[str, Any] | None = None
    """Scoring overrides of the named baseline point (e.g. ``{blend = "rrf", rrf_k = 60}``)."""
    significance_top: int = Field(default=3, ge=1)
    """How many of the top points (ranked on the tune split) are tested against the baseline on
    the report split; Holm's correction runs across them."""
    stat_test: Literal["student", "fisher"] = "student"
    """Paired test from ranx: two-sided paired t-test or Fisher's randomisation test."""
    alpha: float = Field(default=0.05, gt=0.0, lt=1.0)
    """Significance level for Holm-adjusted p-values."""

    @model_validator(mode="after")
    def _check(self) -> SweepSpec:
        if self.tune_split == self.report_split:
            raise ValueError("tune_split and report_split must differ: choose on one split, "
                             "report on another")
        if (self.backend == "postgres") != backend_of(self.db, "duckdb").startswith("postgres"):
            raise ValueError(f"backend {self.backend!r} does not match db {self.db!r}: "
                             f"postgres needs a postgresql+psycopg:// URL, duckdb a file path")
        if self.primary not in self.metrics:
            raise ValueError(f"primary metric {self.primary!r} is not in metrics {self.metrics}")
        if "query_text" in self.base or "query_id" in self.base:
            raise ValueError("base may not set query_text or query_id")
        try:  # validates the overrides (unknown keys rejected)
            self.base_prefs()
        except ValidationError as exc:
            raise ValueError("; ".join(f"base.{_loc(e)}: {e['msg']}"
                                       for e in exc.errors())) from None
        try:
            self.baseline_prefs()
        except ValidationError as exc:
            raise ValueError("; ".join(f"baseline.{_loc(e)}: {e['msg']}"
                                       for e in exc.errors())) from None
        return self

    @property
    def has_pipeline_axes(self) -> bool:
        """True when points go past fusion (chunking or selection axes): such a sweep is run by
        :func:`aiblox.eval.sweep.pipeline.run_pipeline_sweep`."""
        return False

    def base_prefs(self) -> RetrievalPrefs:
        """The base :class:`RetrievalPrefs` every point starts from."""
        return RetrievalPrefs(query_text="", **self.base)

    def baseline_prefs(self) -> RetrievalPrefs | None:
        """The baseline point's prefs, or None."""
        if self.baseline is None:
            return None
        base = self.base_prefs()
        scoring = ScoringConfig(**{**base.scoring.model_dump(), **self.baseline})
        return base.model_copy(update={"scoring": scoring})

    @property
    def hash(self) -> str:
        """sha256 of the spec's canonical JSON: identifies the sweep (parent MLflow run)."""
        return sha256_hex(self.model_dump(mode="json"))

    def points(self) -> list[RetrievalPrefs]:
        """Every grid point as full :class:`RetrievalPrefs`, deduplicated, in grid order."""
        base = self.base_prefs()
        g = self.grid
        blends = g.axis("blend") or [base.scoring.blend]
        depths = g.axis("depth") or [None]
        out: list[RetrievalPrefs] = []
        seen: set[str] = set()
        for blend in blends:
            if blend == "linear":
                axes = [g.axis("w_text") or [None], g.axis("normalize") or [None],
                        g.axis("missing") or [None]]
                combos = [{"w_text": w, "normalize": n, "missing": m}
                          for w, n, m in product(*axes)]
            else:
                combos = [{"rrf_k": k} for k in (g.axis("rrf_k") or [None])]
            for depth, combo in product(depths, combos):
                scoring = {**base.scoring.model_dump(), "blend": blend,
                           **{k: v for k, v in combo.items() if v is not None}}
                if blend == "linear" and combo.get("w_text") is not None:
                    scoring["w_vec"] = float(Decimal(1) - to_decimal(combo["w_text"]))
                update: dict[str, Any] = {"scoring": ScoringConfig(**scoring)}
                if depth is not None:
                    update["fts"] = base.fts.model_copy(update={"top_k": int(depth)})
                    update["vector"] = base.vector.model_copy(update={"top_k": int(depth)})
                p = base.model_copy(update=update)
                key = sha256_hex(p.model_dump(exclude={"query_text", "query_id"}))
                if key not in seen:
                    seen.add(key)
                    out.append(p)
        return out


def _loc(err: dict) -> str:
    return ".".join(str(x) for x in err["loc"]) or "(spec)"


def backend_of(db: str | None, default: str) -> str:
    """``postgres`` for a PostgreSQL URL, ``duckdb`` for a file path, ``default`` for None."""
    if db is None:
        return default
    return "postgres" if str(db).startswith(("postgresql", "postgres://")) else "duckdb"


def load_spec(path: str | Path) -> SweepSpec:
    """Read and validate a sweep spec; :class:`SweepSpecError` names the file and the field."""
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise SweepSpecError(f"{p}: no such sweep spec") from exc
    except tomllib.TOMLDecodeError as exc:
        raise SweepSpecError(f"{p}: not valid TOML: {exc}") from exc
    try:
        return SweepSpec.model_validate(data)
    except ValidationError as exc:
        lines = [f"{p}: field {_loc(e)!r}: {e['msg']}" for e in exc.errors()]
        raise SweepSpecError("\n".join(lines)) from exc
