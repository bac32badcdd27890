"""Retrieval contracts of the retriever seed: request context, preferences, candidates, evidence.

The seed used loose ``dict`` fields for ``fts``, ``vector``, ``scoring``, ``chunking``, ``cache``
and ``snippet``; here each is a typed sub-model with the seed's keys and defaults, and unknown
keys are rejected everywhere so that a typo in a sweep spec fails loudly instead of being ignored.
"""

from __future__ import annotations

import math
import re
import threading
import uuid
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from aiblox.contracts.filter_rule import Filters

MAX_DEPTH = 2**31 - 1
"""The deepest list a depth setting (``top_k``, ``top_k_items``) may ask for: a depth above it
ran into an internal numba error (an integer past 64 bits) or a multi-terabyte allocation
instead of a refusal; a store of more items has never been loaded."""

__all__ = [
    "CacheConfig",
    "CancellationToken",
    "CancelledError",
    "CandidateItem",
    "ChunkingConfig",
    "DOC_SCORES",
    "EvidenceChunk",
    "FtsConfig",
    "HNSW_FROM_VECTORS",
    "LINEAR_SETTINGS",
    "MAX_DEPTH",
    "PASSAGE_FIELDS",
    "RRF_SETTINGS",
    "RequestContext",
    "RetrievalBundle",
    "RetrievalPrefs",
    "RetrievalStats",
    "ScoringConfig",
    "SnippetConfig",
    "VectorConfig",
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class _Settings(_Strict):
    """Search settings: numbers are finite (a NaN weight or an infinite ``k1`` would rank every
    document the same, or by nothing, without a word)."""

    model_config = ConfigDict(allow_inf_nan=False)


class CancelledError(RuntimeError):
    """Raised by :meth:`CancellationToken.raise_if_cancelled` once the request is cancelled."""


class CancellationToken:
    """A thread-safe flag a caller sets to stop a running retrieval between stages."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def cancel(self) -> None:
        """Ask every stage that checks this token to stop."""
        self._event.set()

    @property
    def cancelled(self) -> bool:
        """True once :meth:`cancel` was called."""
        return self._event.is_set()

    def raise_if_cancelled(self) -> None:
        """Raise :class:`CancelledError` when cancelled; stages call this between steps."""
        if self._event.is_set():
            raise CancelledError("retrieval cancelled")


class RequestContext(BaseModel):
    """Per-request context handed to ``Retriever.search``."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True,
                              use_attribute_docstrings=True)

    request_id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    """Caller's id for this request; echoed into stats, never hashed into results."""
    cancellation: CancellationToken = Field(default_factory=CancellationToken)
    """Token the caller may cancel; the retriever checks it between stages."""


class FtsConfig(_Settings):
    """Full-text search settings (the seed's ``fts`` dict).

    With ``engine = "index"`` (the default) BM25 is served by a bm25s-style index built from the
    store's items (:mod:`aiblox.indexes`), the same on every store; the analysis (``lower``,
    ``stopwords``, ``stemmer``, ``fields``) and scoring (``k1``, ``b``, ``method``, ``delta``)
    fields below decide it. With ``engine = "native"`` the store's own full-text search runs:
    DuckDB's fts extension (BM25 with its Porter analysis) or PostgreSQL's tsvector (``mode``,
    ``config``, ``rank_func``).
    """

    engine: Literal["index", "native"] = "index"
    """``index``: BM25 from the derived index (equal to bm25s); ``native``: the store's own
    full-text search (DuckDB fts macro, PostgreSQL tsvector)."""
    k1: float = Field(default=1.2, ge=0.0, le=1e9)
    """BM25 term-frequency saturation (``engine = "index"``). At most 10**9: past about 10**6
    the run is already the limit of no saturation (``tf / length norm``) in 32-bit scores (the
    sample's from 10**6 to 10**40 are one run); at 10**50 the scores overflowed and every query
    scored nDCG 0, silently. Above 0 for ``bm25l`` and ``bm25+`` (see ``method``)."""
    b: float = Field(default=0.75, ge=0.0, le=1.0)
    """BM25 document-length normalisation, 0 (none) to 1 (full)."""
    method: Literal["lucene", "robertson", "atire", "bm25l", "bm25+"] = "lucene"
    """BM25 variant: its idf and term-frequency components, as bm25s names them (Kamphuis et al.,
    "Which BM25 Do You Mean?", ECIR 2020). ``bm25l`` and ``bm25+`` (Lv and Zhai, CIKM 2011)
    refuse ``k1 = 0``: bm25s scores a document by what each term adds over its absence,
    ``(k1 + 1) tf / (k1 norm + tf)`` is 0/0 for an absent term under ``bm25+`` (every score
    NaN), and ``bm25l``'s ``(k1 + 1)(c + delta) / (k1 + c + delta)`` is 1 whatever the count
    (every document scores 0: nothing is returned)."""
    delta: float = Field(default=0.5, ge=0.0, le=100.0)
    """The ``delta`` of ``bm25l`` and ``bm25+`` (ignored by the other variants; Lv and Zhai use
    0.5 to 1). At most 100: the index keeps 32-bit scores, and past that a document's term
    frequency part (at most ``k1 + 1`` times the idf) sinks into ``delta``'s rounding (``1e10``
    ranked adi's queries at nDCG@10 0.15 for 0.49)."""
    stemmer: str | None = "english"
    """Snowball stemmer by PyStemmer name (``english``, ``porter``, ``french``, ...); None: no
    stemming."""
    stopwords: Literal["en", "none"] = "en"
    """Stop words removed before stemming: ``en`` (Lucene's English list, bm25s's ``en``) or
    ``none``."""
    lower: bool = True
    """Lower-case text before splitting it into tokens (runs of two or more word characters)."""
    fields: tuple[Literal["title", "text"], ...] = ("title", "text")
    """Item fields indexed, joined by a space in this order."""
    mode: Literal["web", "plain", "strict", "phrase", "any"] = "web"
    """Native PostgreSQL query parsing: websearch_to_tsquery, plainto_tsquery, to_tsquery or
    phraseto_tsquery (all words required), or ``any``: the query's words OR-ed, ranked.
    DuckDB's fts macro treats every mode as a bag of words."""
    config: str | None = None
    """Native PostgreSQL text search configuration (regconfig), e.g. ``"english"``; None: the
    store's."""
    rank_func: Literal["ts_rank_cd", "ts_rank"] = "ts_rank_cd"
    """Native PostgreSQL ranking function; DuckDB's fts always ranks with its BM25."""
    min_rank: float | None = None
    """Drop full-text hits scoring below this (in the engine's own score scale)."""
    top_k: int = Field(default=100, ge=1, le=MAX_DEPTH)
    """Depth of the full-text candidate list handed to fusion."""
    title_weight: float = Field(default=1.0, ge=0.0)
    """Field weighting (``engine = "index"``, fields ``title`` and ``text``): a title term
    counts ``title_weight`` times a body term. 1.0 (the default) is the plain joined text;
    0 leaves titles out (terms, lengths and document frequencies). With ``title_b`` None the
    weighted counts share one length normalisation: ``tf = w * tf_title + tf_text``, length
    ``w * len_title + len_text`` (an integer ``w`` equals the title written ``w`` times); with
    ``title_b`` set, BM25F (:mod:`aiblox.indexes.bm25`)."""
    title_b: float | None = Field(default=None, ge=0.0, le=1.0)
    """BM25F: the title's own length normalisation (``b`` is then the body's), each field
    normalised by its own average length before the weighted sum is saturated by ``k1``
    (Robertson et al., "Simple BM25 extension to multiple weighted fields", CIKM 2004);
    None: one normalisation of the weighted length (see ``title_weight``)."""

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # field weighting at its defaults stays out of dumps, so configs (and every hash and
        # stage key made of them) written before it existed keep their bytes
        data: dict[str, Any] = handler(self)
        if self.title_weight == 1.0 and "title_weight" in data:
            del data["title_weight"]
        if self.title_b is None and "title_b" in data:
            del data["title_b"]
        return data

    @model_validator(mode="after")
    def _k1_scores(self) -> FtsConfig:
        if self.k1 == 0 and self.method in ("bm25l", "bm25+"):
            undefined = ("is 0/0 for a term a document lacks: every score NaN"
                         if self.method == "bm25+" else
                         "is 1 whatever the term's count: every document scores 0")
            raise ValueError(f"k1 0 under method {self.method!r}: its term-frequency part "
                             f"{undefined}; give k1 > 0 (e.g. 1.2) or another method")
        return self

    @model_validator(mode="after")
    def _fields_weighted(self) -> FtsConfig:
        if self.fielded and not {"title", "text"} <= set(self.fields):
            raise ValueError(f"title_weight and title_b weigh the title against the text: "
                             f"they need fields = ['title', 'text'], got {list(self.fields)}")
        if self.fielded and self.engine != "index":
            raise ValueError("title_weight and title_b apply to engine 'index' only (the "
                             "store's native full-text search indexes the joined text)")
        return self

    @property
    def fielded(self) -> bool:
        """True when titles and bodies are weighted apart (not the plain joined text)."""
        return self.title_weight != 1.0 or self.title_b is not None

    @field_validator("stemmer")
    @classmethod
    def _known_stemmer(cls, v: str | None) -> str | None:
        if v is None:
            return v
        try:
            import Stemmer
        except ImportError:  # pragma: no cover - a core dependency
            return v
        if v not in Stemmer.algorithms():
            raise ValueError(f"unknown stemmer {v!r}; PyStemmer knows: "
                             f"{', '.join(Stemmer.algorithms())} (or none: `--stemmer "
                             f"none`, null in JSON, the key left out in a TOML spec)")
        return v

    @field_validator("fields")
    @classmethod
    def _fields(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        if not v or len(set(v)) != len(v):
            raise ValueError("fields: name title and/or text, each once")
        return v

    def analysis(self) -> dict[str, Any]:
        """The settings that decide the index's tokens (part of the index key)."""
        return {"lower": self.lower, "stopwords": self.stopwords, "stemmer": self.stemmer,
                "fields": list(self.fields)}

    def scoring(self) -> dict[str, Any]:
        """The settings that decide the index's BM25 scores (part of the index key)."""
        out: dict[str, Any] = {"k1": self.k1, "b": self.b, "method": self.method,
                               "delta": self.delta if self.method in ("bm25l", "bm25+")
                               else None}
        if self.fielded:  # absent at the defaults: earlier index keys are unchanged
            out["fields"] = {"title_weight": self.title_weight, "title_b": self.title_b}
        return out


class VectorConfig(_Settings):
    """Vector search settings (the seed's ``vector`` dict).

    With ``engine = "index"`` (the default) vectors are searched in a derived index built from
    the store's item vectors (:mod:`aiblox.indexes`): exact (a blocked float32 matrix product)
    or approximate (faiss HNSW), picked by ``index``. ``engine = "native"`` searches in the
    store's SQL (DuckDB: exact; PostgreSQL: exact or pgvector HNSW by ``index``).
    """

    engine: Literal["index", "native"] = "index"
    """``index``: the derived vector index (the same on every store); ``native``: the store's
    own SQL search."""
    embed_query: bool = True
    """Embed the query text with the store's embedder (False: no vector signal)."""
    distance: Literal["cosine", "l2", "ip"] = "cosine"
    """Similarity: cosine similarity, negated Euclidean distance, or inner product."""
    min_score: float | None = None
    """Drop vector hits whose similarity (higher is better) is below this."""
    top_k: int = Field(default=100, ge=1, le=MAX_DEPTH)
    """Depth of the vector candidate list handed to fusion."""
    index: Literal["auto", "exact", "hnsw"] = "auto"
    """``exact`` scans every vector; ``hnsw`` walks an HNSW graph (approximate); ``auto``:
    exact up to :data:`HNSW_FROM_VECTORS` vectors, HNSW above (the native PostgreSQL path reads
    ``auto`` as exact)."""
    hnsw_m: int = Field(default=32, ge=4, le=256)
    """HNSW: links per node (faiss ``M``)."""
    ef_construction: int = Field(default=200, ge=8, le=4096)
    """HNSW: candidate list size while building (faiss ``efConstruction``)."""
    ef_search: int | None = Field(default=None, ge=1, le=4096)
    """HNSW: candidate list size per query (faiss ``efSearch``, pgvector ``hnsw.ef_search``);
    None: ``max(128, 2 * top_k)`` for the index, ``max(40, top_k)`` for pgvector. The index
    walks with ``max(ef_search, top_k)`` candidates, so it can return ``top_k`` hits; pgvector
    returns at most ``ef_search``. Under metadata filters the index scores a few allowed vectors
    exactly and retries a short walk (:mod:`aiblox.indexes.knn`)."""
    doc_score: str = "first"
    """A document's dense score: ``first``, the cosine of its own vector (its whole text as far
    as the model reads it: MiniLM reads the first 256 word pieces); ``maxp``, the best cosine
    of its passages (Dai and Callan, SIGIR 2019); ``mean_top<k>`` (``k >= 2``, e.g.
    ``mean_top2``), the mean of its ``k`` best passages' cosines (all of them when it has fewer).
    Passages are cut from the document's embedded text by ``passage_chunker`` and searched
    exactly (:class:`aiblox.indexes.PassageIndex`); ``top_k`` counts documents."""
    passage_chunker: str = "token_window"
    """Chunker (registry name) that cuts passages, for a ``doc_score`` other than ``first``."""
    passage_tokens: int | None = Field(default=None, ge=1)
    """Passage token budget (the chunker's ``max_chunk_tokens``); None: its default (256)."""
    passage_overlap: int | None = Field(default=None, ge=0)
    """Tokens shared by consecutive passages; None: the chunker's default."""

    @field_validator("doc_score")
    @classmethod
    def _doc_score(cls, v: str) -> str:
        if not _DOC_SCORE.fullmatch(v):
            raise ValueError(f"doc_score must be one of {', '.join(DOC_SCORES)} "
                             f"(mean_top<k> for any k >= 2), got {v!r}")
        return v

    @model_validator(mode="after")
    def _passages_need_exact_cosine(self) -> VectorConfig:
        if self.doc_score != "first" and (self.engine != "index" or self.distance == "l2"):
            raise ValueError(f"doc_score {self.doc_score!r} scores passages exactly by inner "
                             f"product: it needs engine 'index' and distance 'cosine' or 'ip', "
                             f"got engine {self.engine!r}, distance {self.distance!r}")
        return self

    @model_serializer(mode="wrap")
    def _drop_passages_when_first(self, handler: SerializerFunctionWrapHandler,
                                  info: SerializationInfo) -> dict[str, Any]:
        # passages play no part in "first" scoring: left out of its dump (and of every hash
        # made from it), so configs written before passages existed keep their hashes
        data = handler(self)
        if self.doc_score == "first":
            for name in ("doc_score", *PASSAGE_FIELDS):
                data.pop(name, None)
        return data

    @property
    def passage_k(self) -> int:
        """Passages averaged per document: 1 for ``maxp`` (and ``first``), ``k`` for
        ``mean_top<k>``."""
        return int(self.doc_score[len("mean_top"):]) if self.doc_score.startswith(
            "mean_top") else 1


DOC_SCORES = ("first", "maxp", "mean_top2", "mean_top3")
"""``VectorConfig.doc_score`` values, as examples (``mean_top<k>`` takes any ``k >= 2``)."""
PASSAGE_FIELDS = ("passage_chunker", "passage_tokens", "passage_overlap")
"""The :class:`VectorConfig` fields that decide passages (used unless ``doc_score`` is first)."""
_DOC_SCORE = re.compile(r"first|maxp|mean_top([2-9]|[1-9][0-9]+)")


HNSW_FROM_VECTORS = 300_000
"""``VectorConfig.index = "auto"`` picks HNSW from this many vectors on; below it exact search
is fast enough (about 1,800 queries/s at 100k x 384 on 2 cores) and gives the exact answer."""


LINEAR_SETTINGS = frozenset({"w_text", "w_vec", "normalize", "missing"})
"""Scoring settings of the linear blend only."""
RRF_SETTINGS = frozenset({"rrf_k", "rrf_w_text", "rrf_w_vec"})
"""Scoring settings of reciprocal rank fusion only."""


class ScoringConfig(_Settings):
    """Hybrid fusion settings (the seed's ``scoring`` dict)."""

    blend: Literal["rrf", "linear"] = "rrf"
    """Reciprocal rank fusion or a normalised linear blend of scores."""
    w_text: float = Field(default=0.35, ge=0.0)
    """Weight of the full-text signal in the linear blend."""
    w_vec: float = Field(default=0.65, ge=0.0)
    """Weight of the vector signal in the linear blend."""
    normalize: Literal["minmax", "zscore", "sigmoid", "none"] = "sigmoid"
    """Per-list score normalisation before a linear blend (ignored by RRF)."""
    rrf_k: int = Field(default=60, ge=0, le=MAX_DEPTH)
    """RRF constant k in ``w / (k + rank)`` (Cormack et al. 2009 use 60). At most
    :data:`MAX_DEPTH`: there float64 still orders fused documents by their weighted ranks (as k
    grows RRF tends to a Borda count); at 10**23 every ``1 / (k + rank)`` was one float, all
    documents tied and the sample's nDCG@10 fell from 0.81 to 0.30, silently."""
    rrf_w_text: float = Field(default=1.0, ge=0.0)
    """Per-signal RRF weight of the full-text list (1.0: classic unweighted RRF)."""
    rrf_w_vec: float = Field(default=1.0, ge=0.0)
    """Per-signal RRF weight of the vector list (1.0: classic unweighted RRF)."""
    missing: Literal["zero", "list_min"] = "zero"
    """Linear blend: the normalised score a document gets for a list it is absent from.
    ``zero`` (ranx's choice) or ``list_min``, the list's lowest normalised score (pyserini's).
    RRF always counts an absent list as contributing nothing."""

    @model_validator(mode="after")
    def _weights_not_all_zero(self) -> ScoringConfig:
        # weights summing to 0 score every document 0: the fused run would be the documents
        # in id order, a ranking by nothing
        names = ("w_text", "w_vec") if self.blend == "linear" else ("rrf_w_text", "rrf_w_vec")
        if all(getattr(self, n) == 0 for n in names):
            what = "linear fusion's" if self.blend == "linear" else "RRF's"
            raise ValueError(f"{what} weights sum to 0 ({names[0]} 0, {names[1]} 0): every "
                             f"document would score 0 and come back in id order; give "
                             f"{names[0]} or {names[1]} a positive weight")
        for pair in (("w_text", "w_vec"), ("rrf_w_text", "rrf_w_vec")):
            # a document in both lists would score inf: every such document one tie
            if not math.isfinite(getattr(self, pair[0]) + getattr(self, pair[1])):
                raise ValueError(f"{pair[0]} {getattr(self, pair[0])!r} + {pair[1]} "
                                 f"{getattr(self, pair[1])!r} sum past the largest float; "
                                 f"only their ratio ranks, scale them down")
        return self

    def canonical_for(self, mode: str) -> ScoringConfig:
        """:meth:`canonical` for a point of retrieval ``mode``: the defaults whole outside
        ``hybrid`` (a ``bm25`` or ``dense`` run fuses nothing, so ``--mode bm25 --blend
        linear`` is the ``--mode bm25`` point, one config hash, as README's rule says)."""
        return self.canonical() if mode == "hybrid" else type(self)()

    def canonical(self) -> ScoringConfig:
        """This config with the settings its blend does not read at their defaults (RRF reads
        none of :data:`LINEAR_SETTINGS`, the linear blend none of :data:`RRF_SETTINGS`): what
        config hashes and stage keys are made of, so two configs that fuse alike are one point
        (``--blend rrf --normalize zscore`` is ``--blend rrf``) and a point at the defaults keeps
        the hash it always had. The config itself keeps what it was given (a spec's ``[base]``
        with ``blend = "rrf"`` still hands its ``normalize`` to a grid's linear points)."""
        unused = LINEAR_SETTINGS if self.blend == "rrf" else RRF_SETTINGS
        fields = type(self).model_fields
        reset = {k: fields[k].default for k in sorted(unused)
                 if getattr(self, k) != fields[k].default}
        return self.model_copy(update=reset) if reset else self


class ChunkingConfig(_Strict):
    """Late chunking settings (the seed's ``chunking`` dict)."""

    strategy: Literal["late", "precomputed", "mixed"] = "late"
    """late: chunk candidates at query time; precomputed: chunks made at ingest; mixed: both."""
    chunker_id: str = "sentences"
    """Name of a chunker in the chunker registry."""
    include_headers: bool = True
    """Heading-aware chunkers keep a section's heading line inside its chunk's span (True) or
    leave heading lines out of every chunk (False); ``heading_path`` is filled either way."""
    max_chunk_tokens: int | None = Field(default=None, ge=1)
    """Token budget per chunk; None: the chunker's default."""
    overlap_tokens: int | None = Field(default=None, ge=0)
    """Tokens shared by consecutive chunks; None: the chunker's default."""
    enabled: bool = True
    """False skips chunk-level evidence entirely (document-level retrieval only)."""


class CacheConfig(_Strict):
    """Chunk cache settings (the seed's ``cache`` dict)."""

    use_chunk_cache: bool = True
    """Read chunks from the cache when a valid entry exists."""
    write_chunk_cache: bool = True
    """Write freshly made chunks to the cache."""
    ttl_seconds: int | None = Field(default=None, ge=0)
    """Entries older than this are treated as missing; None: no expiry."""


class SnippetConfig(_Strict):
    """Snippet generation settings (the seed's ``snippet`` dict)."""

    max_chars: int = Field(default=360, ge=1)
    """Snippets are cut to at most this many characters, on a word boundary."""
    prefer_chunk_snippet: bool = True
    """Take the snippet from the item's best evidence chunk when there is one."""


class RetrievalPrefs(_Strict):
    """What to retrieve and how: the input of ``Retriever.search``."""

    query_text: str
    """The user's query, verbatim."""
    filters: Filters = Field(default_factory=dict)
    """Exact-match filters: ``id``, ``kind``, ``source``, ``source_ref`` or ``metadata.<key>``
    to a string, number or boolean or a list of them, checked as they are set (the rule of what
    they match, the same on every store: :mod:`aiblox.contracts.filter_rule`). A search of the
    derived indexes (``engine = "index"``) returns only documents that pass, as many as it would
    return unfiltered where that many pass: BM25 and exact vectors score the allowed documents;
    an HNSW index (``index`` ``hnsw``, or ``auto`` from :data:`HNSW_FROM_VECTORS` vectors)
    scores them exactly when they are at most ``sqrt(2 * hnsw_m * efSearch * n)`` of its ``n``
    and walks the graph above that, retrying a walk left short (:mod:`aiblox.indexes.knn`)."""
    top_k_items: int = Field(default=20, ge=1, le=MAX_DEPTH)
    """Number of document-level candidates returned."""
    top_k_chunks: int = Field(default=12, ge=0, le=MAX_DEPTH)
    """Number of chunk-level evidence chunks returned."""
    per_item_chunk_cap: int = Field(default=3, ge=1)
    """At most this many evidence chunks from one item."""
    mode: Literal["hybrid", "bm25", "dense"] = "hybrid"
    """Signals used: both (the seed's default), full-text only or vector only (for ablations)."""
    fts: FtsConfig = Field(default_factory=FtsConfig)
    """Full-text search settings."""
    vector: VectorConfig = Field(default_factory=VectorConfig)
    """Vector search settings."""
    scoring: ScoringConfig = Field(default_factory=ScoringConfig)
    """Hybrid fusion settings."""
    chunking: ChunkingConfig = Field(default_factory=ChunkingConfig)
    """Late chunking settings."""
    cache: CacheConfig = Field(default_factory=CacheConfig)
    """Chunk cache settings."""
    snippet: SnippetConfig = Field(default_factory=SnippetConfig)
    """Snippet settings."""
    ignore_identical_ids: bool = False
    """Drop a retrieved document whose id equals the query id (BEIR/MTEB protocol for
    argument-retrieval collections), each list searched one deeper so it keeps its depth. In
    a pipeline, every stage that searches (``bm25``, ``dense``, after feedback too) drops it.
    Needs ``query_id``."""
    query_id: str | None = None
    """The query's id in a labelled dataset, used by ``ignore_identical_ids``."""
    debug: bool = False
    """Include detailed stats for ``rag.debug``."""


class CandidateItem(_Strict):
    """A document-level candidate (maps to a ``rag.sources`` card)."""

    item_id: str
    """Store id of the item."""
    kind: str
    """Item kind, e.g. ``doc``."""
    source: str
    """Where the item came from (dataset name, connector)."""
    source_ref: str | None = None
    """Reference inside the source (URL, path, row key)."""
    title: str | None = None
    """Item title."""
    summary: str | None = None
    """Short summary, when the store has one."""
    metadata: dict[str, Any] = Field(default_factory=dict)
    """Item metadata as stored."""
    score: float
    """Fused score (higher is better); ranks are by score desc, then item_id asc."""
    score_text: float | None = None
    """Raw full-text score, None when absent from the full-text list."""
    score_vec: float | None = None
    """Raw vector similarity, None when absent from the vector list."""
    rank_text: int | None = None
    """1-based rank in the full-text list, None when absent."""
    rank_vec: int | None = None
    """1-based rank in the vector list, None when absent."""
    snippet: str | None = None
    """Display snippet, at most ``snippet.max_chars`` characters."""
    snippet_from: Literal["doc", "chunk", "unknown"] = "unknown"
    """Where the snippet came from."""


class EvidenceChunk(_Strict):
    """A chunk-level piece of evidence for synthesis (not a UI artifact)."""

    item_id: str
    """Item the chunk was cut from."""
    chunk_id: str | None = None
    """Stable chunk id: derived from item id, content hash, chunker id and position."""
    text: str
    """Chunk text; equals the item text between ``start_idx`` and ``end_idx``."""
    start_idx: int | None = None
    """Character offset of the chunk start in the item text."""
    end_idx: int | None = None
    """Character offset one past the chunk end in the item text."""
    token_count: int | None = None
    """Tokens in ``text`` under the configured encoding."""
    score: float
    """Chunk score used for ranking (higher is better)."""
    score_text: float | None = None
    """Lexical score of the chunk against the query."""
    score_vec: float | None = None
    """Vector similarity of the chunk to the query."""
    heading_path: list[str] | None = None
    """Markdown heading path enclosing the chunk."""
    anchors: dict[str, Any] | None = None
    """Free-form anchors (page, section ids) kept for citation."""


class RetrievalStats(_Strict):
    """Timings, counts and parameters of one retrieval (surfaced via ``rag.debug``)."""

    timing_ms: dict[str, float] = Field(default_factory=dict)
    """Milliseconds per stage (fts, vector, fusion, chunking, total)."""
    counts: dict[str, int] = Field(default_factory=dict)
    """Counts: hits per signal, fused candidates, chunks, cache hits and misses."""
    params: dict[str, Any] = Field(default_factory=dict)
    """Effective parameters, e.g. embedder id, store kind, fusion settings."""


class RetrievalBundle(_Strict):
    """The output of ``Retriever.search``."""

    candidates: list[CandidateItem] = Field(default_factory=list)
    """Document-level candidates, best first."""
    evidence: list[EvidenceChunk] = Field(default_factory=list)
    """Chunk-level evidence, best first."""
    stats: RetrievalStats = Field(default_factory=RetrievalStats)
    """Timings, counts and parameters."""
