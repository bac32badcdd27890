"""An experiment table: several retrieval systems on one labelled split, each metric's mean, and
paired significance tests against a baseline system (PyTerrier's ``pt.Experiment(baseline=,
test=, correction=)``) or between every pair of systems (ranx's ``compare`` and ``Report``).

A system is a retrieval mode or pipeline scored by :func:`aiblox.engine.evaluate.
evaluate_retrieval` (:func:`system_from_result`) or an external run (:func:`system_from_run`;
a TREC run file read as trec_eval reads it, :func:`read_trec_run`, :mod:`aiblox.data.trec`).
:func:`compare_systems` compares every other system with the baseline, or every pair, metric by
metric, on the per-query values (queries paired by id): a paired t-test (``t``, ranx's,
deterministic), the Wilcoxon signed-rank test (``wilcoxon``, scipy's, deterministic) or
Fisher's randomisation test (``fisher``, ranx's definition, exact for few queries, else seeded:
:func:`aiblox.metrics.significance.fisher_p_value`, deterministic). The p-values of one metric
form one family, adjusted with Holm's step-down method (``holm``, Holm 1979), Bonferroni's
(``bonferroni``) or left as they are (``none``).
(:func:`aiblox.experiment.systems.run_experiment` is the one call that scores the systems too.)

:class:`Experiment` renders the same numbers as a markdown or LaTeX table, a long CSV, a pandas
frame or one JSON object whose shape does not depend on how many systems there are
(:meth:`Experiment.as_json`); every rendering names the test, the correction and the baseline,
and marks a difference as :mod:`aiblox.metrics.marks` says (the signed delta and the adjusted
p-value beside each compared value, ``▲``/``▼`` beside a significant delta). Per-query values
(:meth:`Experiment.per_query_frame`, long form ``system, query_id, metric, value``) and each
system's TREC run (:func:`write_trec_run`, byte-identical for the same ranking, with strictly
decreasing scores so trec_eval and ir-measures score it as aiblox does) can be saved.
"""
from __future__ import annotations

import hashlib
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SkipValidation
from pydantic_core import to_jsonable_python

from aiblox.data import Dataset
from aiblox.data.trec import RunFileError, read_trec_run, run_file_stem, trec_run_text
from aiblox.engine.result import EvalResult, run_hash
from aiblox.experiment.markup import letters, md_escape, md_table, plural, tex_escape
from aiblox.metrics import evaluate_run
from aiblox.metrics.depth import uncut_depths_note
from aiblox.metrics.marks import DOWN, UP, counts_text, delta_text, mark, p_text, value_text
from aiblox.metrics.significance import (
    DEFAULT_SEED,
    Comparison,
    StatTest,
    compare_pairwise,
    compare_to_baseline,
)

__all__ = [
    "CORRECTIONS",
    "EVAL_EXPERIMENT",
    "Experiment",
    "RunFileError",
    "Significance",
    "System",
    "TESTS",
    "compare_systems",
    "read_trec_run",
    "system_from_result",
    "system_from_run",
    "trec_run_text",
    "write_trec_run",
]

Test = Literal["t", "wilcoxon", "fisher"]
Correction = Literal["holm", "bonferroni", "none"]
TESTS: dict[str, str] = {"t": "paired t-test", "wilcoxon": "Wilcoxon signed-rank test",
                         "fisher": "Fisher randomisation test"}
"""The paired tests by CLI name, with the name a table's footer gives them."""
CORRECTIONS: dict[str, str] = {"holm": "Holm correction", "bonferroni": "Bonferroni correction",
                               "none": "no correction"}
"""The multiple-comparison corrections by CLI name, with their footer names."""
EVAL_EXPERIMENT = "aiblox-eval"
"""The MLflow experiment ``aiblox eval --mlflow`` logs to by default."""


class Significance(BaseModel):
    """One system against the baseline on one metric."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    delta: float
    """System mean minus baseline mean over the paired queries."""
    p: float
    """Raw two-sided p-value of the paired test."""
    p_adjusted: float
    """p-value after the correction, within this metric's family of systems (>= ``p``)."""
    significant: bool
    """``p_adjusted <= alpha``."""
    wins: int
    """Queries where the system scores higher than the baseline."""
    ties: int
    """Queries with equal values."""
    losses: int
    """Queries where the system scores lower."""
    dropped: int = 0
    """Queries left out of the test because either side's value is NaN
    (:attr:`aiblox.metrics.Comparison.dropped`)."""


class System(BaseModel):
    """One scored system: a retrieval mode, a retrieval pipeline or an external run, holding
    its :class:`~aiblox.engine.result.EvalResult` (what the table reads through the
    properties below)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    name: str
    """Label in the table (a mode name, a pipeline's expression, or a run file's stem)."""
    kind: Literal["mode", "pipeline", "run"]
    """``mode``: retrieved here with retrieval preferences; ``pipeline``: retrieved here by a
    pipeline of stages; ``run``: an external run (a TREC run file, a run mapping or frame)."""
    source: str | None = None
    """The run file a ``run`` system was read from."""
    result: SkipValidation[EvalResult] = Field(exclude=True)
    """Its scores on the split: means, per-query values, hashes, timings, config, the run."""

    @property
    def n_queries(self) -> int:
        """Judged queries scored."""
        return self.result.n_queries

    @property
    def metrics(self) -> dict[str, float]:
        """Mean metric values (ranx names)."""
        return self.result.metrics

    @property
    def hashes(self) -> dict[str, str]:
        """``dataset``, ``run`` (and ``config`` for a mode, ``file`` sha256 for a run file)."""
        return self.result.hashes

    @property
    def timings(self) -> dict[str, float]:
        """Seconds for retrieval and scoring, queries per second (systems retrieved here)."""
        return self.result.timings

    @property
    def config(self) -> dict[str, Any]:
        """The effective configuration of a system retrieved here (what ``hashes['config']``
        covers)."""
        return self.result.config

    @property
    def per_query(self) -> dict[str, dict[str, float]]:
        """Per-query values ``{metric: {qid: value}}``."""
        return self.result.per_query

    @property
    def run(self) -> dict[str, list[tuple[str, float]]]:
        """The ranked run ``{qid: [(doc, score), ...]}``, best first."""
        return self.result.run

    @property
    def expression(self) -> str | None:
        """A pipeline system's expression (its name may be a label: ``--pipeline
        'p=EXPR'``); None for a mode or a run."""
        return self.result.pipeline if self.kind == "pipeline" else None

    def as_json(self) -> dict[str, Any]:
        """``name, kind, source, n_queries, metrics, hashes, timings, config`` (JSON types),
        and a pipeline's ``expression``."""
        out = {"name": self.name, "kind": self.kind, "source": self.source,
               "n_queries": self.n_queries, "metrics": dict(self.metrics),
               "hashes": dict(self.hashes), "timings": dict(self.timings),
               "config": to_jsonable_python(self.config)}
        if self.kind == "pipeline":
            out["expression"] = self.expression
        return out


def system_from_result(result: EvalResult, name: str | None = None,
                       kind: Literal["mode", "pipeline"] = "mode") -> System:
    """A :class:`~aiblox.engine.result.EvalResult` as a system (named after its mode)."""
    return System(name=name or result.mode, kind=kind, result=result)


def system_from_run(dataset: Dataset, split: str, run: dict[str, list[tuple[str, float]]],
                    name: str, metrics: Sequence[str], source: str | Path | None = None, *,
                    ignore_identical_ids: bool = False) -> System:
    """An external run scored on ``dataset``'s ``split`` with ranx, each query's hits in the
    run's order (:func:`read_trec_run` gives trec_eval's). As trec_eval reads it, with a
    warning naming the run for each rule applied: queries of the run that the split does not
    judge are ignored; a judged query with no line scores 0 and every mean is over all the
    judged queries (``trec_eval -c``, ir-measures; plain trec_eval averages over the queries
    the run holds). ``ignore_identical_ids``: a hit whose document id is its query's id is
    dropped before scoring and before the run hash, as BEIR's evaluation drops it (the
    protocol ``aiblox eval --ignore-identical-ids`` gives its modes, which search one deeper
    instead; a run's list is one shorter). Raises :class:`RunFileError` when the run holds
    none of the split's judged queries (a run of another dataset or split)."""
    if ignore_identical_ids:
        run = {q: [h for h in hits if h[0] != q] for q, hits in run.items()}
    try:
        qrels = dataset.split_qrels(split)
    except ValueError:
        raise ValueError(f"dataset {dataset.name} has no split {split!r} loaded (it holds "
                         f"{', '.join(sorted(dataset.qrels)) or 'none'}): load it with that "
                         f"split (load_dataset(..., splits=[{split!r}]))") from None
    judged = {q for q, docs in qrels.items() if docs}
    where = f"--run {source}" if source is not None else f"run {name!r}"
    if not judged & set(run):
        raise RunFileError(f"{where}: none of its {len(run)} query ids is a judged query of "
                           f"{dataset.name}/{split} (e.g. {sorted(run)[0]!r})")
    _warn_queries(where, run, judged, dataset, split)
    means, per_query = evaluate_run(qrels, run, metrics)
    hashes = {"dataset": dataset.hash, "run": run_hash(run)}
    if source is not None:
        hashes["file"] = hashlib.sha256(Path(source).read_bytes()).hexdigest()
    result = EvalResult(dataset=dataset.name, split=split, mode="run", n_queries=len(judged),
                        metrics=means, hashes=hashes, per_query=per_query, run=run)
    return System(name=name, kind="run", source=str(source) if source is not None else None,
                  result=result)


def _warn_queries(where: str, run: dict[str, list[tuple[str, float]]], judged: set[str],
                  dataset: Dataset, split: str) -> None:
    """Warn about the run's queries ``split`` does not judge and judged queries it lacks."""
    scored = f"{dataset.name}/{split}"
    extra = sorted(set(run) - judged)
    if extra:
        unknown = [q for q in extra if q not in dataset.queries]
        known = [q for q in extra if q in dataset.queries]
        parts = [f"{len(unknown)} no query of {dataset.name} (e.g. "
                 f"{', '.join(map(repr, unknown[:3]))})" if unknown else "",
                 f"{len(known)} not judged in {split} (e.g. {', '.join(map(repr, known[:3]))})"
                 if known else ""]
        warnings.warn(f"{where}: {plural(len(extra), 'query', 'queries')} of the run's {len(run)} "
                      f"{'is' if len(extra) == 1 else 'are'} ignored, as trec_eval ignores "
                      f"them: {'; '.join(p for p in parts if p)}", stacklevel=3)
    absent = sorted(judged - set(run))
    if absent:
        warnings.warn(f"{where}: {plural(len(absent), 'judged query', 'judged queries')} of "
                      f"{scored} {'has' if len(absent) == 1 else 'have'} no line in the run "
                      f"(e.g. {', '.join(map(repr, absent[:3]))}); scored 0, every mean over "
                      f"all {len(judged)} judged queries, as trec_eval -c and ir-measures "
                      f"(plain trec_eval averages over the {len(judged) - len(absent)} the run "
                      f"holds)", stacklevel=3)


def write_trec_run(system: System, folder: str | Path) -> Path:
    """Write ``system``'s run to ``folder/<name>.trec`` (tag: its name,
    :func:`run_file_stem`); returns the path."""
    safe = run_file_stem(system.name)
    path = Path(folder) / f"{safe}.trec"
    path.write_bytes(trec_run_text(system.run, safe).encode("utf-8"))
    return path


_STAT: dict[str, StatTest] = {"t": "student", "wilcoxon": "wilcoxon", "fisher": "fisher"}
"""The CLI's test names (PyTerrier's ``t``) as :mod:`aiblox.metrics.significance` names
them."""


class Experiment(BaseModel):
    """Systems scored on one split, compared with a baseline or pairwise (see the module
    doc)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    dataset: str
    """Dataset name."""
    split: str
    """Split scored."""
    metrics: list[str]
    """ranx metric names, in column order."""
    test: str
    """Paired test: ``t``, ``wilcoxon`` or ``fisher``."""
    correction: str
    """Correction within a metric's family: ``holm``, ``bonferroni`` or ``none``."""
    alpha: float = 0.05
    """Significance level of the adjusted p-values."""
    baseline: str | None = None
    """The baseline system's name (None: no tests against a baseline)."""
    pairwise: bool = False
    """Every pair of systems tested (ranx's ``compare``): :attr:`pairs`."""
    systems: list[System]
    """The systems, in the order given."""
    significance: dict[str, dict[str, Significance]] = Field(default_factory=dict)
    """``{system: {metric: Significance}}`` for every system but the baseline."""
    pairs: dict[str, dict[str, dict[str, Significance]]] = Field(default_factory=dict)
    """With :attr:`pairwise`: ``{system: {other: {metric: Significance}}}``, the system
    against each other one (both ways round: the delta is the system's mean minus the
    other's); one family per metric, the ``n(n-1)/2`` pairs."""

    def key(self, system: System) -> str:
        """A system's letter in a pairwise table (``a``, ``b``, ...; ``aa`` after ``z``)."""
        i = [s.name for s in self.systems].index(system.name)
        return letters(i)

    def compared(self, system: System, metric: str) -> Significance | None:
        """The system against the baseline on ``metric`` (None: the baseline itself, or no
        baseline)."""
        return self.significance.get(system.name, {}).get(metric)

    def footer(self, tex: bool = False) -> str:
        """What the marks mean, the test, the correction and the family; ``tex``: as LaTeX
        text."""
        esc = tex_escape if tex else (lambda x: x)
        test, corr = TESTS[self.test], CORRECTIONS[self.correction]
        up, down, le = (_TEX_UP, _TEX_DOWN, "$\\leq$") if tex else (UP, DOWN, "<=")
        n = len(self.systems)
        if self.pairwise:
            return (f"{up}x/{down}x: significantly higher/lower than system x with adjusted p "
                    f"{le} {self.alpha:g} ({esc(test)}, {esc(corr)} across the "
                    f"{plural(n * (n - 1) // 2, 'pair')} of systems per metric)")
        if self.baseline is None:
            return esc(f"no significance tests: no baseline given (test: {test}, {corr})")
        return (f"(delta, p): the difference from baseline {esc(self.baseline)}'s mean and its "
                f"adjusted p; {up}/{down} significantly higher/lower (adjusted p {le} "
                f"{self.alpha:g}; {esc(test)}, {esc(corr)} across the "
                f"{plural(n - 1, 'system')} compared per metric)")

    def title(self) -> str:
        """``dataset / split (n queries)``."""
        n = max((s.n_queries for s in self.systems), default=0)
        return f"{self.dataset} / {self.split} ({n} queries)"

    def detail(self, system: System, metric: str) -> str:
        """What a table shows beside a value: ``-0.2326▼ p=0.0003`` against the baseline (its
        mark when significant), ``▲b,c ▼d`` pairwise (the systems it is significantly above
        or below), ``""`` for the baseline or without tests."""
        if self.pairwise:
            ups: list[str] = []
            downs: list[str] = []
            for other in self.systems:
                sig = self.pairs.get(system.name, {}).get(other.name, {}).get(metric)
                if sig is not None and sig.significant and sig.delta != 0:
                    (ups if sig.delta > 0 else downs).append(self.key(other))
            return " ".join(f"{m}{','.join(keys)}" for m, keys in ((UP, ups), (DOWN, downs))
                            if keys)
        sig = self.compared(system, metric)
        if sig is None:
            return ""
        left_out = f", {sig.dropped} NaN left out" if sig.dropped else ""
        p = p_text(sig.p_adjusted, self.alpha)
        return f"{delta_text(sig.delta, sig.significant)} p={p}{left_out}"

    def cell(self, system: System, metric: str) -> str:
        """A value as Markdown and LaTeX readers see it: ``0.4688 (-0.2326▼, p=0.0003)``
        against the baseline, ``0.7014 ▲b,c`` pairwise, ``0.7014`` alone."""
        value, detail = value_text(system.metrics[metric]), self.detail(system, metric)
        if not detail:
            return value
        if self.pairwise:
            return f"{value} {detail}"
        return f"{value} ({detail.replace(' p=', ', p=')})"

    def label(self, system: System) -> str:
        """A system's name, ``(baseline)`` appended to the baseline's, its letter before it
        in a pairwise table."""
        if self.pairwise:
            return f"({self.key(system)}) {system.name}"
        return f"{system.name} (baseline)" if system.name == self.baseline else system.name

    def pair_rows(self) -> list[list[str]]:
        """With :attr:`pairwise`: ``[metric, system, against, delta (marked), p adjusted,
        W/T/L]`` for every pair (each once: the later system against the earlier)."""
        rows = []
        for m in self.metrics:
            for i, a in enumerate(self.systems):
                for b in self.systems[i + 1:]:
                    sig = self.pairs[b.name][a.name][m]
                    rows.append([m, self.label(b), self.label(a),
                                 delta_text(sig.delta, sig.significant),
                                 p_text(sig.p_adjusted, self.alpha),
                                 counts_text(sig.wins, sig.ties, sig.losses, sig.dropped)])
        return rows

    def as_json(self) -> dict[str, Any]:
        """One JSON object, the same shape for one system or many: dataset, split, test,
        correction, alpha, baseline, pairwise, metrics, and ``systems``, each with name, kind,
        source, n_queries, metrics, hashes, timings, config, ``significance`` ``{metric: {p,
        p_adjusted, significant, delta, wins, ties, losses, dropped}}`` (empty for the baseline or
        without one) and ``pairwise`` ``{other: {metric: {...}}}`` (empty unless
        :attr:`pairwise`)."""
        systems = []
        for s in self.systems:
            d = s.as_json()
            d["significance"] = {m: sig.model_dump(mode="json")
                                 for m, sig in self.significance.get(s.name, {}).items()}
            d["pairwise"] = {o: {m: sig.model_dump(mode="json") for m, sig in by_m.items()}
                             for o, by_m in self.pairs.get(s.name, {}).items()}
            systems.append(d)
        return {"dataset": self.dataset, "split": self.split, "test": self.test,
                "correction": self.correction, "alpha": self.alpha, "baseline": self.baseline,
                "pairwise": self.pairwise, "metrics": list(self.metrics), "systems": systems}

    def to_markdown(self) -> str:
        """A GitHub-flavoured markdown table, the title above and the footer below (and,
        pairwise, the table of every pair: delta, adjusted p, wins/ties/losses)."""
        lines = [f"**{md_escape(self.title())}**", "",
                 *md_table(["system", *self.metrics],
                            [[self.label(s), *(self.cell(s, m) for m in self.metrics)]
                             for s in self.systems])]
        if self.pairwise and len(self.systems) > 1:
            lines += ["", *md_table(PAIR_HEAD, self.pair_rows(), left=3)]
        lines += ["", md_escape(self.footer())]
        return "\n".join(lines) + "\n"

    def _repr_markdown_(self) -> str:  # a notebook shows the table
        return self.to_markdown()

    def to_latex(self) -> str:
        """A LaTeX ``table`` (plain ``tabular`` with ``\\hline``; no packages needed), the
        footer as its caption; a compared value carries its delta (marked
        :math:`\\bigtriangleup`/:math:`\\bigtriangledown` when significant) and adjusted p
        in small type."""
        def cell(s: System, m: str) -> str:
            value, detail = value_text(s.metrics[m]), self.detail(s, m)
            if not detail:
                return value
            detail = (detail.replace(UP, _TEX_UP).replace(DOWN, _TEX_DOWN)
                      .replace("p=<", "$p<$").replace("p=", "$p$=").replace(" $p", ", $p"))
            return f"{value} {{\\scriptsize {detail if self.pairwise else f'({detail})'}}}"

        cols = "l" + "r" * len(self.metrics)
        caption = f"{tex_escape(self.title())}. {self.footer(tex=True)}"
        lines = ["\\begin{table}[t]", "\\centering",
                 f"\\caption{{{caption}}}",
                 f"\\begin{{tabular}}{{{cols}}}", "\\hline",
                 " & ".join(["System", *map(tex_escape, self.metrics)]) + " \\\\", "\\hline"]
        for s in self.systems:
            row = [tex_escape(self.label(s)), *(cell(s, m) for m in self.metrics)]
            lines.append(" & ".join(row) + " \\\\")
        lines += ["\\hline", "\\end{tabular}", "\\end{table}"]
        return "\n".join(lines) + "\n"

    def to_csv(self) -> str:
        """Long CSV, one row per system and metric: ``system, metric, value, delta, p,
        p_adjusted, significant, mark, test, correction, baseline`` (delta, the p-values and
        the mark empty for the baseline or without one; ``mark`` ``▲``/``▼`` when
        significant), so every row names the test and the correction. Pairwise, one row per
        system, metric and other system, named in ``baseline``. Values at full precision."""
        import csv
        import io

        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["system", "metric", "value", "delta", "p", "p_adjusted", "significant",
                    "mark", "test", "correction", "baseline"])
        for s in self.systems:
            for m in self.metrics:
                against: list[tuple[str, Significance | None]] = (
                    [(o.name, self.pairs.get(s.name, {}).get(o.name, {}).get(m))
                     for o in self.systems if o.name != s.name] if self.pairwise
                    else [(self.baseline or "", self.compared(s, m))])
                for other, sig in against or [("", None)]:
                    w.writerow([s.name, m, repr(s.metrics[m]),
                                *((repr(sig.delta), repr(sig.p), repr(sig.p_adjusted),
                                   str(sig.significant).lower(), mark(sig.delta, sig.significant))
                                  if sig else ("", "", "", "", "")),
                                self.test, self.correction, other])
        return buf.getvalue()

    def to_frame(self) -> Any:
        """The table as a pandas frame, one row per system: ``system``, each metric's mean,
        and where a test ran, per metric ``<metric> delta``, ``<metric> p``, ``<metric>
        p_adjusted`` and ``<metric> mark`` against the baseline (None for the baseline), or
        pairwise ``<metric> mark`` (``▲b ▼c``: the systems it is significantly above and
        below). Values at full precision."""
        import pandas as pd

        rows = []
        for s in self.systems:
            row: dict[str, Any] = {"system": s.name, **{m: s.metrics[m] for m in self.metrics}}
            for m in self.metrics:
                if self.pairwise:
                    row[f"{m} mark"] = self.detail(s, m)
                elif self.baseline is not None:
                    sig = self.compared(s, m)
                    row.update({f"{m} delta": sig.delta if sig else None,
                                f"{m} p": sig.p if sig else None,
                                f"{m} p_adjusted": sig.p_adjusted if sig else None,
                                f"{m} mark": mark(sig.delta, sig.significant) if sig else None})
            rows.append(row)
        return pd.DataFrame(rows)

    def per_query_frame(self, more: Mapping[str, Mapping[str, Mapping[str, float]]] | None = None
                        ) -> Any:
        """Per-query values as a long pandas frame ``system, query_id, metric, value``, systems
        in order, then metric and query id sorted; ``more``: further values of a system
        (``{system: {metric: {query_id: value}}}``, e.g. its chunk-level metrics), after its
        own."""
        import pandas as pd

        rows = [(s.name, q, m, float(v)) for s in self.systems
                for values in (s.per_query, (more or {}).get(s.name, {}))
                for m in sorted(values) for q, v in sorted(values[m].items())]
        return pd.DataFrame(rows, columns=["system", "query_id", "metric", "value"])

    def write_per_query(self, path: str | Path,
                        more: Mapping[str, Mapping[str, Mapping[str, float]]] | None = None
                        ) -> Path:
        """:meth:`per_query_frame` to ``path``: parquet (``.parquet``, ``.pq``) or CSV
        (``.csv``) by suffix."""
        p = Path(path)
        frame = self.per_query_frame(more)
        if p.suffix.lower() in (".parquet", ".pq"):
            frame.to_parquet(p, index=False)
        elif p.suffix.lower() == ".csv":
            frame.to_csv(p, index=False, lineterminator="\n")
        else:
            raise ValueError(f"--per-query {p}: write .parquet or .csv")
        return p


PAIR_HEAD = ["metric", "system", "against", "delta", "p (adjusted)", "W/T/L"]
"""The columns of a pairwise table (:meth:`Experiment.pair_rows`)."""
_TEX_UP, _TEX_DOWN = "$\\bigtriangleup$", "$\\bigtriangledown$"


def compare_systems(systems: Sequence[System], dataset: str, split: str,
                    metrics: Sequence[str], baseline: str | None = None, test: Test = "t",
                    correction: Correction = "holm", alpha: float = 0.05,
                    seed: int = DEFAULT_SEED,
                    pairwise: bool = False) -> Experiment:
    """The table of scored systems: every system compared with ``baseline`` (a system's name;
    None: no tests), or with ``pairwise`` every pair of systems (ranx's ``compare``), on each
    metric's per-query values, queries paired by id; the p-values of one metric form one
    family for the correction. Raises ``ValueError`` naming the choices for an unknown
    baseline, test or correction, a baseline given with ``pairwise``, or two systems with one
    name."""
    names = [s.name for s in systems]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"two systems are named {dup[0]!r}: give each a distinct name")
    if test not in TESTS:
        raise ValueError(f"unknown test {test!r}; choose one of {', '.join(TESTS)}")
    if correction not in CORRECTIONS:
        raise ValueError(f"unknown correction {correction!r}; choose one of "
                         f"{', '.join(CORRECTIONS)}")
    if baseline is not None and baseline not in names:
        raise ValueError(f"baseline {baseline!r} is not a system; choose one of "
                         f"{', '.join(names)}")
    if baseline is not None and pairwise:
        raise ValueError(f"baseline {baseline!r} and pairwise: tests against one baseline, or "
                         f"between every pair of systems; choose one")
    _check_same_queries(systems, metrics)
    note = uncut_depths_note(metrics, {s.name: [len(h) for h in s.result.run.values()]
                                       for s in systems})
    if note is not None:
        warnings.warn(note, stacklevel=2)
    significance: dict[str, dict[str, Significance]] = {}
    pairs: dict[str, dict[str, dict[str, Significance]]] = {}
    if baseline is not None:
        base = next(s for s in systems if s.name == baseline)
        others = [(s.name, s.per_query) for s in systems if s.name != baseline]
        # the one route aiblox compare and the sweep take: adjusted within a metric, wins
        # under the metric's direction
        for c in compare_to_baseline(base.per_query, others, metrics, _STAT[test], alpha, seed,
                                     correction):
            significance.setdefault(c.candidate, {})[c.metric] = _significance(c)
    if pairwise:
        for c in compare_pairwise([(s.name, s.per_query) for s in systems], metrics,
                                  _STAT[test], alpha, seed, correction):
            assert c.against is not None
            sig = _significance(c)
            pairs.setdefault(c.candidate, {}).setdefault(c.against, {})[c.metric] = sig
            pairs.setdefault(c.against, {}).setdefault(c.candidate, {})[c.metric] = (
                # 0.0 - delta: the reverse of a zero delta is 0.0, never -0.0
                sig.model_copy(update={"delta": 0.0 - sig.delta, "wins": sig.losses,
                                       "losses": sig.wins}))
    return Experiment(dataset=dataset, split=split, metrics=list(metrics), test=test,
                      correction=correction, alpha=alpha, baseline=baseline, pairwise=pairwise,
                      systems=list(systems), significance=significance, pairs=pairs)


def _check_same_queries(systems: Sequence[System], metrics: Sequence[str]) -> None:
    """``ValueError`` when two systems were scored on different queries (another split, a
    fold, another dataset): their means are not comparable, and a paired test would pair only
    the queries they share (a delta of 0 beside different means)."""
    first: tuple[str, set[str]] | None = None
    for s in systems:
        metric = next((m for m in metrics if m in s.per_query), None)
        if metric is None:
            continue
        qids = set(s.per_query[metric])
        if first is None:
            first = (s.name, qids)
        elif qids != first[1]:
            only = sorted(qids ^ first[1])
            raise ValueError(f"systems {first[0]!r} ({len(first[1])} queries) and {s.name!r} "
                             f"({len(qids)} queries) were scored on different queries (e.g. "
                             f"{only[0]!r}): score them on one dataset split to compare them")


def _significance(c: Comparison) -> Significance:
    return Significance(delta=c.delta, p=c.p_value, p_adjusted=c.p_adjusted,
                        significant=c.significant, wins=c.wins, ties=c.ties, losses=c.losses,
                        dropped=c.dropped)
