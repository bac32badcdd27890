"""How deep a run must be for its metrics: the evaluation depth, and retrieval settings checked
against it before any work.

A metric with a cutoff (``ndcg@10``, ``recall@1000``) reads the first ``k`` documents of each
query's run. A run cut shallower than ``k`` gives ``recall@1000`` the value of ``recall@100``
under the deeper name: trec_eval scores what a run holds, so the run must hold ``k`` documents
wherever the collection has them. A run is cut by ``top_k_items`` (the fused candidates kept)
and by the candidate lists it is made from: ``fts.top_k`` (BM25), ``vector.top_k`` (dense;
pgvector's HNSW, ``engine = "native"``, returns at most ``vector.ef_search`` when that is set),
for hybrid the deeper of the two (the union of two lists holds at least the longer one).

The rule, the same in ``aiblox eval``, :func:`~aiblox.engine.evaluate.evaluate_retrieval`, sweeps
and the notebooks' helpers:

- the evaluation depth (:func:`evaluation_depth`) is :data:`DEFAULT_DEPTH` (100), or the
  deepest cutoff asked for when deeper; a metric without a cutoff (``map``, ``ndcg``,
  ``recall``, ``r-precision``, ``bpref``, ``rbp.95`` ...) reads the whole run, which is then
  :data:`WHOLE_RUN_DEPTH` (1,000) deep: TREC's runs are, and trec_eval's ``map`` is theirs;
- a depth the caller did not set (``top_k_items``, ``fts.top_k``, ``vector.top_k`` left out of
  :class:`~aiblox.contracts.retrieval.RetrievalPrefs`: pydantic's ``model_fields_set``) takes
  the evaluation depth (:func:`evaluation_prefs`). ``RetrievalPrefs()`` keeps the retriever
  seed's defaults for search (20 items): an evaluation reads ``RetrievalPrefs(query_text="")``
  as "as deep as the metrics need", so Python gives the CLI's numbers;
- a depth set explicitly below a cutoff is refused (:func:`check_depth`:
  :class:`DepthError` naming the metrics, their cutoff, the setting and its value). A metric
  without a cutoff reads whatever an explicitly set depth retrieves, as trec_eval does; where
  runs compared side by side are cut at different depths (``bm25`` 1,000 deep beside ``bm25 %
  100``, a sweep's ``depth`` axis), their values differ by depth as well as by ranking, and a
  warning says so (:func:`uncut_depths_note`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from aiblox.contracts.retrieval import RetrievalPrefs

__all__ = [
    "DEFAULT_DEPTH",
    "DEFAULT_FIX",
    "DepthError",
    "DepthLimit",
    "WHOLE_RUN_DEPTH",
    "check_depth",
    "deepest_cutoff",
    "evaluation_depth",
    "evaluation_prefs",
    "grid_depths_note",
    "metric_cutoff",
    "metrics_within",
    "run_depth",
    "run_limits",
    "shallow_limit",
    "shallow_message",
    "shallow_metrics",
    "uncut_depths_note",
]

DEFAULT_DEPTH = 100
"""Documents retrieved and scored per query by an evaluation whose metrics need no more
(``aiblox eval``'s ``--top-k`` and ``--depth``, :func:`evaluate_retrieval`, sweeps)."""

WHOLE_RUN_DEPTH = 1000
"""The evaluation depth when a metric has no cutoff and reads the whole run (``map``,
``r-precision``, ``bpref``): TREC's 1,000 documents per query, the runs trec_eval scores."""


class DepthError(ValueError):
    """Retrieval settings that cut a run shallower than a metric's cutoff; the message names
    the metrics, the cutoff, the setting and its value."""


def metric_cutoff(name: str) -> int | None:
    """The ranks metric ``name`` reads: ``k`` of ``name@k`` (``ndcg@10-l2``: 10), None for a
    metric without a cutoff (``map``, ``r-precision``, ``rbp.95``), which reads the whole
    run. ``name`` is a valid ranx name (:func:`~aiblox.metrics.validate_metrics`)."""
    head = name.split("-l")[0]
    if head.startswith("rbp"):
        return None  # rbp@95 / rbp.95: its persistence, not a cutoff
    _, sep, k = head.partition("@")
    return int(k) if sep else None


def deepest_cutoff(metrics: Iterable[str]) -> int | None:
    """The largest cutoff among ``metrics`` (None when none has one)."""
    cuts = [c for c in map(metric_cutoff, metrics) if c is not None]
    return max(cuts) if cuts else None


def evaluation_depth(metrics: Iterable[str]) -> int:
    """Documents per query an evaluation of ``metrics`` retrieves when the caller sets no
    depth: :data:`DEFAULT_DEPTH`, the deepest cutoff if deeper, at least
    :data:`WHOLE_RUN_DEPTH` when a metric has no cutoff."""
    metrics = list(metrics)
    depth = max(DEFAULT_DEPTH, deepest_cutoff(metrics) or 0)
    if any(metric_cutoff(m) is None for m in metrics):
        depth = max(depth, WHOLE_RUN_DEPTH)
    return depth


def shallow_metrics(metrics: Iterable[str], depth: int) -> list[str]:
    """The metrics whose cutoff is deeper than ``depth``, in their order."""
    return [m for m in metrics if (metric_cutoff(m) or 0) > depth]


@dataclass(frozen=True)
class DepthLimit:
    """One bound on how deep a configuration's run can be: the settings that set it (two for a
    hybrid's candidate lists, whose union is as deep as the deeper one) and the depth."""

    fields: tuple[str, ...]
    """``RetrievalPrefs`` fields, dotted (``top_k_items``, ``fts.top_k``, ``vector.top_k``,
    ``vector.ef_search``)."""
    depth: int
    """The most documents per query the run can hold under them."""


def _vector_limit(prefs: RetrievalPrefs) -> tuple[str, int]:
    v = prefs.vector
    if v.engine == "native" and v.index == "hnsw" and v.ef_search is not None \
            and v.ef_search < v.top_k:  # pgvector's HNSW returns at most ef_search (the
        return "vector.ef_search", v.ef_search  # derived index walks max(ef_search, top_k))
    return "vector.top_k", v.top_k


def run_limits(prefs: RetrievalPrefs) -> list[DepthLimit]:
    """Every bound ``prefs`` puts on the depth of its run: ``top_k_items``, and the candidate
    lists of its mode (for hybrid, one bound: the deeper list)."""
    limits = [DepthLimit(("top_k_items",), prefs.top_k_items)]
    text = ("fts.top_k", prefs.fts.top_k)
    vec = _vector_limit(prefs)
    if prefs.mode == "bm25" or (prefs.mode == "hybrid" and not prefs.vector.embed_query):
        lists = [text]
    elif prefs.mode == "dense":
        lists = [vec]
    else:
        lists = [text, vec]
    limits.append(DepthLimit(tuple(f for f, _ in lists), max(d for _, d in lists)))
    return limits


def evaluation_prefs(prefs: RetrievalPrefs, metrics: Iterable[str]) -> RetrievalPrefs:
    """``prefs`` with every depth the caller did not set (``top_k_items``, ``fts.top_k``,
    ``vector.top_k`` outside ``model_fields_set``) at the :func:`evaluation_depth` of
    ``metrics``; the depths set explicitly are kept (:func:`check_depth` refuses one that is
    too shallow)."""
    depth = evaluation_depth(metrics)
    update: dict[str, object] = {}
    if "top_k_items" not in prefs.model_fields_set:
        update["top_k_items"] = depth
    if "top_k" not in prefs.fts.model_fields_set:
        update["fts"] = prefs.fts.model_copy(update={"top_k": depth})
    if "top_k" not in prefs.vector.model_fields_set:
        update["vector"] = prefs.vector.model_copy(update={"top_k": depth})
    return prefs.model_copy(update=update) if update else prefs


def _names(fields: Sequence[str], names: Mapping[str, str] | None) -> list[str]:
    """What the caller calls ``fields``, each once (``--depth`` names two fields)."""
    return list(dict.fromkeys((names or {}).get(f, f) for f in fields))


def _said(name: str, value: int) -> str:
    """``top_k_items = 20`` or ``--top-k 20``."""
    return f"{name} {value}" if name.startswith("-") else f"{name} = {value}"


DEFAULT_FIX = "retrieve at least {cut}, or use cutoffs of at most {depth}"
"""How :func:`check_depth` says to fix a run too shallow, by default (a ``str.format``
template of ``cut``, ``depth`` and ``names``, the settings as the caller calls them)."""


def check_depth(prefs: RetrievalPrefs, metrics: Iterable[str],
                names: Mapping[str, str] | None = None, fix: str = DEFAULT_FIX) -> None:
    """Raise :class:`DepthError` when ``prefs`` cut the run shallower than a cutoff of
    ``metrics``, naming the metrics, the setting and its value; ``names`` maps a field
    (``top_k_items``, ``fts.top_k``) to what the caller calls it (``--top-k``,
    ``grid.depth``); ``fix`` says how to fix it (see :data:`DEFAULT_FIX`)."""
    metrics = list(metrics)
    limit = shallow_limit(prefs, metrics)
    if limit is None:
        return
    shallow = shallow_metrics(metrics, limit.depth)
    values = {"top_k_items": prefs.top_k_items, "fts.top_k": prefs.fts.top_k,
              "vector.top_k": prefs.vector.top_k, "vector.ef_search": prefs.vector.ef_search or 0}
    said = _names(limit.fields, names)
    shown = list(dict.fromkeys(_said((names or {}).get(f, f), values[f]) for f in limit.fields))
    raise DepthError(shallow_message(
        shallow, " and ".join(shown), limit.depth, fused=len(limit.fields) > 1,
        plural=len(shown) > 1,
        fix=fix.format(cut=deepest_cutoff(shallow), depth=limit.depth, names=" and ".join(said))))


def metrics_within(prefs: RetrievalPrefs, metrics: Iterable[str]) -> list[str]:
    """The ``metrics`` a run under ``prefs`` is deep enough for (a cutoff at most every bound
    of :func:`run_limits`; a metric without a cutoff always), in their order."""
    depth = run_depth(prefs)
    return [m for m in metrics if (metric_cutoff(m) or 0) <= depth]


def run_depth(prefs: RetrievalPrefs) -> int:
    """The most documents per query a run under ``prefs`` can hold: its tightest bound of
    :func:`run_limits`."""
    return min(limit.depth for limit in run_limits(prefs))


def _reads(metrics: Sequence[str]) -> str:
    """``ndcg@10 reads`` or ``map, recall read``: the subject of a depth message."""
    return f"{metrics[0]} reads" if len(metrics) == 1 else f"{', '.join(metrics)} read"


def shallow_limit(prefs: RetrievalPrefs, metrics: Iterable[str]) -> DepthLimit | None:
    """The tightest bound of :func:`run_limits` when it cuts the run above a cutoff of
    ``metrics`` (None when the run is deep enough for all of them)."""
    cut = deepest_cutoff(metrics)
    tightest = min(run_limits(prefs), key=lambda limit: limit.depth)
    return tightest if cut is not None and tightest.depth < cut else None


def shallow_message(metrics: Sequence[str], setting: str, depth: int, fused: bool = False,
                    plural: bool = False, fix: str = DEFAULT_FIX) -> str:
    """The refusal of ``metrics`` over a run that ``setting`` cuts at ``depth``: ``recall@100
    reads 100 documents per query, but top_k_items = 20 cuts the run at 20 ...``."""
    cut = deepest_cutoff(metrics) or 0
    read = _reads(metrics)
    if fused:
        cuts = (f"retrieve{'' if plural else 's'} at most {depth} candidates per list (a hybrid "
                f"run is as deep as its deeper list)")
    else:
        cuts = f"cut{'' if plural else 's'} the run at {depth}"
    return (f"{read} {cut} documents per query, but {setting} {cuts}: "
            f"{'it' if len(metrics) == 1 else 'they'} would be computed over {depth} documents "
            f"under the name @{cut}; " + fix.format(cut=cut, depth=depth, names=setting))


_CUTTABLE = frozenset({"map", "recall", "ndcg", "ndcg_burges", "precision", "mrr", "hit_rate",
                       "hits", "f1"})
"""Metrics without a cutoff that take one (``map`` -> ``map@100``)."""


def _run_cut_depth(lengths: Sequence[int]) -> int | None:
    """The depth a run looks cut at, from its queries' list lengths: the longest, when most
    queries reach it (a cut, not the collection or the matches running out); else None."""
    if not lengths:
        return None
    longest = max(lengths)
    return longest if 2 * sum(n == longest for n in lengths) > len(lengths) else None


def _cutoff_advice(metrics: Iterable[str], shallow: int) -> str:
    """How to name ``metrics`` (those without a cutoff) to compare runs cut at ``shallow``."""
    named = [f"{m}@{shallow}" for m in metrics if m.split("-l")[0] in _CUTTABLE]
    return (f"name a cutoff ({', '.join(named)}) to compare like with like" if named
            else "compare runs of one depth")


def uncut_depths_note(metrics: Iterable[str], lengths: Mapping[str, Sequence[int]]
                      ) -> str | None:
    """The warning when metrics without a cutoff (``map``, ``recall``: they read each run
    whole) score runs compared side by side of which one is cut shallower than another run
    goes (``lengths``: each run's list length per query, by its name); None when there is
    nothing to say (every metric has a cutoff, or no run is cut above another's documents)."""
    uncut = [m for m in metrics if metric_cutoff(m) is None]
    if not uncut or len(lengths) < 2:
        return None
    cuts = {name: _run_cut_depth(ls) for name, ls in lengths.items()}
    deepest = max((max(ls) for ls in lengths.values() if ls), default=0)
    shallow = [d for d in cuts.values() if d is not None and d < deepest]
    if not shallow:
        return None
    listed = ", ".join(f"{name} {max(ls, default=0):,}" for name, ls in lengths.items())
    return (f"{_reads(uncut)} each run whole, and these runs are not equally deep (documents "
            f"per query, at most: {listed}): a run cut shallower scores lower for its depth "
            f"alone; {_cutoff_advice(uncut, min(shallow))}")


def grid_depths_note(metrics: Iterable[str], depths: Iterable[int]) -> str | None:
    """The warning when metrics without a cutoff score a sweep's points cut at different
    ``depths`` (:func:`run_depth` of each): the board compares points that differ by depth
    alone. None when there is nothing to say."""
    uncut = [m for m in metrics if metric_cutoff(m) is None]
    cut_at = sorted(set(depths))
    if not uncut or len(cut_at) < 2:
        return None
    return (f"{_reads(uncut)} each run whole, and the grid's points are cut at "
            f"{', '.join(map(str, cut_at))} documents per query: a shallower point scores "
            f"lower for its depth alone; {_cutoff_advice(uncut, cut_at[0])}")
