"""Source cards: the evidence packer of the evidence packer seed, retrieval output to the
``rag.sources`` cards a UI shows.

The packer turns document-level :class:`~aiblox.contracts.retrieval.CandidateItem` s (and,
optionally, chunk-level :class:`~aiblox.contracts.retrieval.EvidenceChunk` s for snippets) into
small, stable, UI-facing :class:`SourceItem` s. It does no retrieval, no chunking and no
rendering, and it never raises for missing optional data: invalid input gives an empty list and,
with ``options.debug``, a reason in :class:`PackDebug`.

Packing algorithm (v0.1):

1. Order the candidates (``score``: score desc, then item id asc, then input position;
   ``rank``: retrieval rank asc (the better of ``rank_text`` and ``rank_vec``, see
   :func:`retrieval_rank`), then score desc; ``input``: as given), drop repeated item ids (the
   first in that order wins) and keep the top ``max_sources``. Descending score puts ``+inf``
   first and ``-inf`` after every finite score, NaN last; a card's ``score`` is None when it is
   not finite, so the payload stays valid JSON.
2. Snippet: with ``prefer_chunk_snippets``, the highest-scoring chunk of the item (score desc,
   then chunk id, start offset and input position), whitespace collapsed and cut to
   ``max_snippet_chars`` (``snippet_from="chunk"``); else the candidate's summary or its own
   snippet (``"doc"``); else none (``"unknown"``).
3. Metadata: ``include_metadata_keys`` exposes only those keys, as they are (named one by one:
   nothing leaks by accident), less any ``exclude_metadata_keys``; otherwise only the safe subset
   is exposed (see :func:`safe_metadata`: no ``_`` keys, no raw content, nothing large), less
   ``exclude_metadata_keys``. An exclude list narrows the safe subset, never widens it (it
   exposed ``_secret``, ``text`` and embedding lists: the seed keeps metadata exposure
   "explicitly controlled to avoid accidental leakage" and "no large content in-band").
4. Ranks 1..n on the final order.

The packer does not emit events itself (evidence packer seed): :mod:`aiblox.evidence.events`
builds the ``rag.sources`` and ``rag.debug`` payloads the orchestrator sends.

TODO (seed): richer snippet heuristics, several snippets per source, citation anchoring.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from aiblox.contracts.retrieval import CandidateItem, EvidenceChunk

__all__ = [
    "DefaultEvidencePacker",
    "EvidencePackOptions",
    "EvidencePacker",
    "PACKER_VERSION",
    "PackDebug",
    "PackResult",
    "SourceItem",
    "cut_snippet",
    "retrieval_rank",
    "safe_metadata",
]

PACKER_VERSION = "0.1"

_ELLIPSIS = "\u2026"
_WS = re.compile(r"\s+")
# Keys never exposed by default: bulky or raw content that does not belong in a UI card.
_DEFAULT_DENIED_KEYS = frozenset(
    {"body", "content", "embedding", "embeddings", "html", "raw", "text", "vector", "vectors"}
)
_MAX_SAFE_STR = 512
_MAX_SAFE_LIST = 32


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class EvidencePackOptions(_Strict):
    """Limits and formatting hints for :meth:`EvidencePacker.pack`."""

    max_sources: int = Field(default=6, ge=0)
    """At most this many source cards (limits UI clutter)."""
    prefer_chunk_snippets: bool = True
    """Take the snippet from the item's highest-scoring evidence chunk when there is one."""
    max_snippet_chars: int = Field(default=360, ge=1)
    """Snippets are cut to at most this many characters (an ellipsis included)."""
    include_metadata_keys: list[str] | None = None
    """When set, only these metadata keys are exposed, as they are (JSON values only)."""
    exclude_metadata_keys: list[str] | None = None
    """When set, these metadata keys are removed: from ``include_metadata_keys``, or else from
    the safe subset (:func:`safe_metadata`; its deny list and size limits still apply)."""
    order_by: Literal["score", "rank", "input"] = "score"
    """Ordering: fused score desc, retrieval rank asc, or the incoming order."""
    debug: bool = False
    """Return a :class:`PackDebug` with counts and the reason for an empty result."""


class SourceItem(_Strict):
    """One UI source card: an element of ``rag.sources.payload.sources``."""

    source_id: str
    """Stable id; equals ``CandidateItem.item_id``."""
    kind: str
    """Item kind (documents, jobs, entities, custom, or the store's own kind such as ``doc``)."""
    title: str | None = None
    """Display title, when the item has one."""
    url: str | None = None
    """An http(s) link to the item, when its source reference or metadata holds one."""
    snippet: str | None = None
    """Short excerpt, at most ``max_snippet_chars`` characters."""
    snippet_from: Literal["doc", "chunk", "unknown"] = "unknown"
    """Where the snippet came from."""
    score: float | None = None
    """The candidate's fused score (None when it was not a finite number)."""
    rank: int | None = None
    """1-based position in the final order."""
    metadata: dict[str, Any] = Field(default_factory=dict)
    """Exposed metadata after include/exclude filtering."""


class PackDebug(_Strict):
    """What the packer did, for ``rag.debug`` (filled when ``options.debug`` is set)."""

    packer_version: str = PACKER_VERSION
    """Version of the packing algorithm."""
    reason: str | None = None
    """Why the result is empty or partial (invalid input), None when all was well."""
    input_candidates: int = 0
    """Candidates received."""
    duplicate_candidates: int = 0
    """Candidates dropped because their item id was already selected."""
    selected: int = 0
    """Source cards returned."""
    input_chunks: int = 0
    """Evidence chunks received."""
    invalid_chunks: int = 0
    """Evidence chunks ignored because they did not validate."""
    snippet_from: dict[str, int] = Field(default_factory=dict)
    """Number of cards per snippet origin (chunk, doc, unknown)."""


class PackResult(_Strict):
    """Sources plus, when asked for, the packer's debug record."""

    sources: list[SourceItem] = Field(default_factory=list)
    """The source cards, in final order."""
    debug: PackDebug | None = None
    """Debug record (None unless ``options.debug``)."""


@runtime_checkable
class EvidencePacker(Protocol):
    """Turns retrieval output into UI-facing sources; must be deterministic."""

    def pack(
        self,
        candidates: Sequence[CandidateItem | Mapping[str, Any]],
        evidence_chunks: Sequence[EvidenceChunk | Mapping[str, Any]] | None,
        options: EvidencePackOptions,
    ) -> list[SourceItem]:
        """Convert retrieval output into UI-facing sources. Must be deterministic."""
        ...


def _finite(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, int | float):
        return None
    f = float(x)
    return f if math.isfinite(f) else None


def _desc(x: Any) -> tuple[bool, float]:
    """Sort key for a score in descending order: ``+inf`` first, then finite scores high to low,
    then ``-inf``; NaN and non-numbers last (the seed's "descending score" on every float)."""
    if isinstance(x, bool) or not isinstance(x, int | float) or math.isnan(x):
        return (True, 0.0)
    return (False, -float(x))


def retrieval_rank(candidate: CandidateItem) -> int | None:
    """The candidate's retrieval rank: the better of its ranks in the retriever's lists
    (``rank_text``, ``rank_vec``; positive ones), else None (unranked candidates sort last).
    The item's stored ``metadata`` is not retrieval output: a ``metadata["rank"]`` is not read."""
    ranks = [r for r in (candidate.rank_text, candidate.rank_vec) if r is not None and r > 0]
    return min(ranks) if ranks else None


def cut_snippet(text: str | None, max_chars: int) -> str | None:
    """Collapse whitespace and cut to at most ``max_chars`` characters, on a word boundary when
    one lies in the last third, marking the cut with an ellipsis. Empty text gives None."""
    if not isinstance(text, str):
        return None
    clean = _WS.sub(" ", text).strip()
    if not clean:
        return None
    if len(clean) <= max_chars:
        return clean
    if max_chars == 1:
        return _ELLIPSIS
    head = clean[: max_chars - 1]
    space = head.rfind(" ")
    if clean[max_chars - 1] != " " and space >= (2 * (max_chars - 1)) // 3:
        head = head[:space]
    return head.rstrip() + _ELLIPSIS


def _json_safe(value: Any, depth: int = 0) -> tuple[bool, Any]:
    """(ok, plain value) for JSON-representable values with finite floats and str keys."""
    if value is None or isinstance(value, bool | str | int):
        return True, value
    if isinstance(value, float):
        return (True, value) if math.isfinite(value) else (False, None)
    if depth > 8:
        return False, None
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if not isinstance(k, str):
                return False, None
            ok, pv = _json_safe(v, depth + 1)
            if not ok:
                return False, None
            out[k] = pv
        return True, out
    if isinstance(value, list | tuple):
        items = []
        for v in value:
            ok, pv = _json_safe(v, depth + 1)
            if not ok:
                return False, None
            items.append(pv)
        return True, items
    return False, None


def _small_scalar(value: Any) -> bool:
    if isinstance(value, str):
        return len(value) <= _MAX_SAFE_STR
    return value is None or isinstance(value, bool | int | float)


def safe_metadata(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The default exposed subset: keys not starting with ``_`` and not naming raw content
    (``text``, ``content``, ``body``, ``embedding`` ...), whose value is a scalar (strings up to
    512 characters) or a list of at most 32 such scalars."""
    out: dict[str, Any] = {}
    for key in sorted(k for k in metadata if isinstance(k, str)):
        if key.startswith("_") or key.lower() in _DEFAULT_DENIED_KEYS:
            continue
        ok, value = _json_safe(metadata[key])
        if not ok:
            continue
        if _small_scalar(value) or (
            isinstance(value, list)
            and len(value) <= _MAX_SAFE_LIST
            and all(_small_scalar(v) for v in value)
        ):
            out[key] = value
    return out


def _filter_metadata(metadata: Mapping[str, Any], options: EvidencePackOptions) -> dict[str, Any]:
    unwanted = set(options.exclude_metadata_keys or ())
    if options.include_metadata_keys is None:  # the safe subset, an exclude only narrows it
        return {k: v for k, v in safe_metadata(metadata).items() if k not in unwanted}
    wanted = set(options.include_metadata_keys) - unwanted
    out: dict[str, Any] = {}
    for key in sorted(k for k in metadata if isinstance(k, str) and k in wanted):
        ok, value = _json_safe(metadata[key])
        if ok:  # values that cannot be JSON (objects, NaN) are never exposed
            out[key] = value
    return out


def _url(candidate: CandidateItem) -> str | None:
    for value in (candidate.source_ref, candidate.metadata.get("url")):
        if isinstance(value, str) and value.lower().startswith(("http://", "https://")):
            return value
    return None


def _order(candidates: list[CandidateItem], order_by: str) -> list[CandidateItem]:
    indexed = list(enumerate(candidates))
    if order_by == "input":
        return candidates[:]
    if order_by == "rank":

        def rank_key(pair: tuple[int, CandidateItem]) -> tuple[Any, ...]:
            i, c = pair
            r = retrieval_rank(c)
            return (r is None, r or 0, *_desc(c.score), c.item_id, i)

        return [c for _, c in sorted(indexed, key=rank_key)]

    def score_key(pair: tuple[int, CandidateItem]) -> tuple[Any, ...]:
        i, c = pair
        return (*_desc(c.score), c.item_id, i)

    return [c for _, c in sorted(indexed, key=score_key)]


def _best_chunks(chunks: list[EvidenceChunk]) -> dict[str, EvidenceChunk]:
    best: dict[str, tuple[tuple[Any, ...], EvidenceChunk]] = {}
    for i, ch in enumerate(chunks):
        key = (
            *_desc(ch.score),
            ch.chunk_id is None,
            ch.chunk_id or "",
            ch.start_idx is None,
            ch.start_idx or 0,
            i,
        )
        cur = best.get(ch.item_id)
        if cur is None or key < cur[0]:
            best[ch.item_id] = (key, ch)
    return {k: v[1] for k, v in best.items()}


class DefaultEvidencePacker:
    """The seed's packing algorithm (v0.1); see the module docstring."""

    version = PACKER_VERSION

    def pack(
        self,
        candidates: Sequence[CandidateItem | Mapping[str, Any]],
        evidence_chunks: Sequence[EvidenceChunk | Mapping[str, Any]] | None = None,
        options: EvidencePackOptions | Mapping[str, Any] | None = None,
    ) -> list[SourceItem]:
        """Source cards for ``candidates``; never raises, invalid input gives ``[]``."""
        return self.pack_with_debug(candidates, evidence_chunks, options).sources

    def pack_with_debug(
        self,
        candidates: Any,
        evidence_chunks: Any = None,
        options: Any = None,
    ) -> PackResult:
        """Like :meth:`pack`, also returning a :class:`PackDebug` when ``options.debug``."""
        try:
            return self._pack(candidates, evidence_chunks, options)
        except Exception as exc:  # never raise: the seed's error-handling rule
            debug = options.debug if isinstance(options, EvidencePackOptions) else True
            reason = f"internal error: {type(exc).__name__}: {exc}"
            return PackResult(sources=[], debug=PackDebug(reason=reason) if debug else None)

    def _pack(self, candidates: Any, evidence_chunks: Any, options: Any) -> PackResult:
        # Options first: without valid options we do not know whether to debug; we do (safe).
        if options is None:
            opts = EvidencePackOptions()
        elif isinstance(options, EvidencePackOptions):
            opts = options
        else:
            try:
                opts = EvidencePackOptions.model_validate(options)
            except (ValidationError, TypeError, ValueError) as exc:
                return PackResult(debug=PackDebug(reason=f"invalid options: {_short(exc)}"))
        debug = PackDebug()

        def done(sources: list[SourceItem], reason: str | None = None) -> PackResult:
            debug.reason = reason if reason is not None else debug.reason
            debug.selected = len(sources)
            counts: dict[str, int] = {}
            for s in sources:
                counts[s.snippet_from] = counts.get(s.snippet_from, 0) + 1
            debug.snippet_from = dict(sorted(counts.items()))
            return PackResult(sources=sources, debug=debug if opts.debug else None)

        if not _is_list_like(candidates):
            return done([], f"candidates must be a list, got {type(candidates).__name__}")
        cands: list[CandidateItem] = []
        debug.input_candidates = len(candidates)
        for i, raw in enumerate(candidates):
            try:
                cand = raw if isinstance(raw, CandidateItem) else CandidateItem.model_validate(raw)
            except (ValidationError, TypeError, ValueError) as exc:
                return done([], f"invalid candidate at index {i}: {_short(exc)}")
            cands.append(cand)

        chunks: list[EvidenceChunk] = []
        if evidence_chunks is not None:
            if not _is_list_like(evidence_chunks):
                debug.reason = (
                    f"evidence_chunks ignored: not a list ({type(evidence_chunks).__name__})"
                )
            else:
                debug.input_chunks = len(evidence_chunks)
                for raw in evidence_chunks:
                    try:
                        ch = (
                            raw
                            if isinstance(raw, EvidenceChunk)
                            else (EvidenceChunk.model_validate(raw))
                        )
                    except (ValidationError, TypeError, ValueError):
                        debug.invalid_chunks += 1
                        continue
                    chunks.append(ch)
                if debug.invalid_chunks:
                    debug.reason = f"ignored {debug.invalid_chunks} invalid evidence chunk(s)"

        ordered = _order(cands, opts.order_by)
        seen: set[str] = set()
        selected: list[CandidateItem] = []
        for c in ordered:
            if c.item_id in seen:
                debug.duplicate_candidates += 1
                continue
            seen.add(c.item_id)
            if len(selected) < opts.max_sources:
                selected.append(c)

        best = _best_chunks(chunks) if opts.prefer_chunk_snippets else {}
        sources: list[SourceItem] = []
        for rank, c in enumerate(selected, start=1):
            snippet: str | None = None
            origin: Literal["doc", "chunk", "unknown"] = "unknown"
            chunk = best.get(c.item_id)
            if chunk is not None:
                snippet = cut_snippet(chunk.text, opts.max_snippet_chars)
                origin = "chunk"
            if snippet is None:
                for text, frm in ((c.summary, "doc"), (c.snippet, c.snippet_from)):
                    snippet = cut_snippet(text, opts.max_snippet_chars)
                    if snippet is not None:
                        origin = "doc" if frm == "unknown" else frm  # type: ignore[assignment]
                        break
                else:
                    origin = "unknown"
            sources.append(
                SourceItem(
                    source_id=c.item_id,
                    kind=c.kind,
                    title=c.title,
                    url=_url(c),
                    snippet=snippet,
                    snippet_from=origin,
                    score=_finite(c.score),
                    rank=rank,
                    metadata=_filter_metadata(c.metadata, opts),
                )
            )
        return done(sources)


def _is_list_like(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, str | bytes | bytearray)


def _short(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        errs = exc.errors()
        if not errs:
            return "invalid"
        loc = ".".join(str(p) for p in errs[0]["loc"]) or "(root)"
        more = f" (+{len(errs) - 1} more)" if len(errs) > 1 else ""
        return f"{loc}: {errs[0]['msg']}{more}"
    return str(exc)
