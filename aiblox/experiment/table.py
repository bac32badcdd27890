"""An experiment table: several retrieval systems on one labelled split, each metric's mean, and
paired significance tests against a baseline system (PyTerrier's ``pt.Experiment(baseline=,
test=, correction=)``, ranx's ``compare`` and ``Report``).

A system is a retrieval mode scored by :func:`aiblox.engine.evaluate.evaluate_retrieval`
(:func:`system_from_result`) or an external TREC run file (:func:`read_trec_run`,
:func:`system_from_run`), read as trec_eval reads it (:mod:`aiblox.data.trec`).
:func:`run_experiment` compares every other system with the baseline, metric by metric, on
the per-query values (queries paired by id): a paired t-test (``t``, ranx's, deterministic),
the Wilcoxon signed-rank test (``wilcoxon``, scipy's, deterministic) or
ranx's Fisher randomisation test (``fisher``, seeded; its p-values can vary with the numba
thread count). The p-values of one metric form one family, adjusted with Holm's step-down
method (``holm``, Holm 1979), Bonferroni's (``bonferroni``) or left as they are (``none``).

:class:`Experiment` renders the same numbers as a markdown or LaTeX table, a long CSV or one
JSON object whose shape does not depend on how many systems there are (:meth:`Experiment.
as_json`); every rendering names the test, the correction and the baseline. Per-query values
(:meth:`Experiment.per_query_frame`, long form ``system, query_id, metric, value``) and each
system's TREC run (:func:`write_trec_run`, byte-identical for the same ranking, with strictly
decreasing scores so trec_eval and ir-measures score it as aiblox does) can be saved.
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SkipValidation

from aiblox.data import Dataset
from aiblox.data.trec import RunFileError, read_trec_run, trec_run_text
from aiblox.engine.evaluate import EvalResult, run_hash
from aiblox.metrics import evaluate_run
from aiblox.metrics.significance import StatTest, compare_to_baseline

__all__ = [
    "CORRECTIONS",
    "EVAL_EXPERIMENT",
    "Experiment",
    "RunFileError",
    "Significance",
    "System",
    "TESTS",
    "read_trec_run",
    "run_experiment",
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
MARK = "†"
"""Marks a value significantly different from the baseline's (adjusted p <= alpha)."""


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


class System(BaseModel):
    """One scored system: a retrieval mode or an external run."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    name: str
    """Label in the table (a mode name, or a run file's stem)."""
    kind: Literal["mode", "run"]
    """``mode``: retrieved here; ``run``: read from a TREC run file."""
    source: str | None = None
    """The run file a ``run`` system was read from."""
    n_queries: int
    """Judged queries scored."""
    metrics: dict[str, float]
    """Mean metric values (ranx names)."""
    hashes: dict[str, str]
    """``dataset``, ``run`` (and ``config`` for a mode, ``file`` sha256 for a run file)."""
    timings: dict[str, float] = Field(default_factory=dict)
    """Seconds for retrieval and scoring, queries per second (modes)."""
    config: dict[str, Any] = Field(default_factory=dict)
    """A mode's effective configuration (what ``hashes['config']`` covers)."""
    per_query: SkipValidation[dict[str, dict[str, float]]] = Field(default_factory=dict,
                                                                   exclude=True)
    """Per-query values ``{metric: {qid: value}}`` (not serialised)."""
    run: SkipValidation[dict[str, list[tuple[str, float]]]] = Field(default_factory=dict,
                                                                    exclude=True)
    """The ranked run ``{qid: [(doc, score), ...]}``, best first (not serialised)."""


def system_from_result(result: EvalResult, name: str | None = None) -> System:
    """A mode's :class:`~aiblox.engine.evaluate.EvalResult` as a system (named after its mode)."""
    return System(name=name or result.mode, kind="mode", n_queries=result.n_queries,
                  metrics=dict(result.metrics), hashes=dict(result.hashes),
                  timings=dict(result.timings), config=dict(result.config),
                  per_query=result.per_query, run=result.run)


def system_from_run(dataset: Dataset, split: str, run: dict[str, list[tuple[str, float]]],
                    name: str, metrics: Sequence[str], source: str | Path | None = None
                    ) -> System:
    """An external run scored on ``dataset``'s ``split`` with ranx, each query's hits in the
    run's order (:func:`read_trec_run` gives trec_eval's). As trec_eval reads it, with a
    warning naming the run for each rule applied: queries of the run that the split does not
    judge are ignored; a judged query with no line scores 0 and every mean is over all the
    judged queries (``trec_eval -c``, ir-measures; plain trec_eval averages over the queries
    the run holds). Raises :class:`RunFileError` when the run holds none of the split's judged
    queries (a run of another dataset or split)."""
    judged = {q for q, docs in dataset.qrels[split].items() if docs}
    where = f"--run {source}" if source is not None else f"run {name!r}"
    if not judged & set(run):
        raise RunFileError(f"{where}: none of its {len(run)} query ids is a judged query of "
                           f"{dataset.name}/{split} (e.g. {sorted(run)[0]!r})")
    _warn_queries(where, run, judged, dataset, split)
    means, per_query = evaluate_run(dataset.qrels[split], run, metrics)
    hashes = {"dataset": dataset.hash, "run": run_hash(run)}
    if source is not None:
        hashes["file"] = hashlib.sha256(Path(source).read_bytes()).hexdigest()
    return System(name=name, kind="run", source=str(source) if source is not None else None,
                  n_queries=len(judged), metrics=means, hashes=hashes, per_query=per_query,
                  run=run)


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
        warnings.warn(f"{where}: {_plural(len(extra), 'query', 'queries')} of the run's {len(run)} "
                      f"{'is' if len(extra) == 1 else 'are'} ignored, as trec_eval ignores "
                      f"them: {'; '.join(p for p in parts if p)}", stacklevel=3)
    absent = sorted(judged - set(run))
    if absent:
        warnings.warn(f"{where}: {_plural(len(absent), 'judged query', 'judged queries')} of "
                      f"{scored} {'has' if len(absent) == 1 else 'have'} no line in the run "
                      f"(e.g. {', '.join(map(repr, absent[:3]))}); scored 0, every mean over "
                      f"all {len(judged)} judged queries, as trec_eval -c and ir-measures "
                      f"(plain trec_eval averages over the {len(judged) - len(absent)} the run "
                      f"holds)", stacklevel=3)


def write_trec_run(system: System, folder: str | Path) -> Path:
    """Write ``system``'s run to ``folder/<name>.trec`` (tag: its name); returns the path."""
    safe = "".join(c if c.isalnum() or c in "-_.@" else "_" for c in system.name) or "run"
    path = Path(folder) / f"{safe}.trec"
    path.write_bytes(trec_run_text(system.run, safe).encode("utf-8"))
    return path


_STAT: dict[str, StatTest] = {"t": "student", "wilcoxon": "wilcoxon", "fisher": "fisher"}
"""The CLI's test names (PyTerrier's ``t``) as :mod:`aiblox.metrics.significance` names
them."""


class Experiment(BaseModel):
    """Systems scored on one split, compared with a baseline (see the module doc)."""

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
    """The baseline system's name (None: no tests)."""
    systems: list[System]
    """The systems, in the order given."""
    significance: dict[str, dict[str, Significance]] = Field(default_factory=dict)
    """``{system: {metric: Significance}}`` for every system but the baseline."""

    def footer(self, tex: bool = False) -> str:
        """One line naming the test, the correction and the baseline (and the mark); ``tex``:
        as LaTeX text."""
        esc = _tex if tex else (lambda x: x)
        test, corr = TESTS[self.test], CORRECTIONS[self.correction]
        if self.baseline is None:
            return esc(f"no significance tests: no --baseline given (test: {test}, {corr})")
        mark, le = ("$^\\dagger$", "$\\leq$") if tex else (MARK, "<=")
        return (f"{mark} differs from baseline {esc(self.baseline)} with adjusted p {le} "
                f"{self.alpha:g} ({esc(test)}, {esc(corr)} across the "
                f"{_plural(len(self.systems) - 1, 'system')} compared per metric)")

    def title(self) -> str:
        """``dataset / split (n queries)``."""
        n = max((s.n_queries for s in self.systems), default=0)
        return f"{self.dataset} / {self.split} ({n} queries)"

    def cell(self, system: System, metric: str, digits: int = 4) -> str:
        """A metric value as a table shows it, marked when significant."""
        sig = self.significance.get(system.name, {}).get(metric)
        mark = MARK if sig is not None and sig.significant else ""
        return f"{system.metrics[metric]:.{digits}f}{mark}"

    def label(self, system: System) -> str:
        """A system's name, ``(baseline)`` appended to the baseline's."""
        return f"{system.name} (baseline)" if system.name == self.baseline else system.name

    def as_json(self) -> dict[str, Any]:
        """One JSON object, the same shape for one system or many: dataset, split, test,
        correction, alpha, baseline, metrics, and ``systems``, each with name, kind, source,
        n_queries, metrics, hashes, timings, config and ``significance`` ``{metric: {p,
        p_adjusted, significant, delta, wins, ties, losses}}`` (empty for the baseline or
        without one)."""
        systems = []
        for s in self.systems:
            d = s.model_dump(mode="json")
            d["significance"] = {m: sig.model_dump(mode="json")
                                 for m, sig in self.significance.get(s.name, {}).items()}
            systems.append(d)
        return {"dataset": self.dataset, "split": self.split, "test": self.test,
                "correction": self.correction, "alpha": self.alpha, "baseline": self.baseline,
                "metrics": list(self.metrics), "systems": systems}

    def to_markdown(self) -> str:
        """A GitHub-flavoured markdown table, the title above and the footer below."""
        head = ["system", *self.metrics]
        lines = [f"**{_md(self.title())}**", "",
                 "| " + " | ".join(_md(h) for h in head) + " |",
                 "|" + "|".join(["---", *(["---:"] * len(self.metrics))]) + "|"]
        for s in self.systems:
            lines.append("| " + " | ".join([_md(self.label(s)),
                                            *(self.cell(s, m) for m in self.metrics)]) + " |")
        lines += ["", _md(self.footer())]
        return "\n".join(lines) + "\n"

    def to_latex(self) -> str:
        """A LaTeX ``table`` (plain ``tabular`` with ``\\hline``; no packages needed), the
        footer as its caption."""
        def cell(s: System, m: str) -> str:
            text = self.cell(s, m)
            return text.replace(MARK, "$^\\dagger$")

        cols = "l" + "r" * len(self.metrics)
        caption = f"{_tex(self.title())}. {self.footer(tex=True)}"
        lines = ["\\begin{table}[t]", "\\centering",
                 f"\\caption{{{caption}}}",
                 f"\\begin{{tabular}}{{{cols}}}", "\\hline",
                 " & ".join(["System", *(_tex(m) for m in self.metrics)]) + " \\\\", "\\hline"]
        for s in self.systems:
            lines.append(" & ".join([_tex(self.label(s)), *(cell(s, m) for m in self.metrics)])
                         + " \\\\")
        lines += ["\\hline", "\\end{tabular}", "\\end{table}"]
        return "\n".join(lines) + "\n"

    def to_csv(self) -> str:
        """Long CSV, one row per system and metric: ``system, metric, value, delta, p,
        p_adjusted, significant, test, correction, baseline`` (delta and the p-values empty
        for the baseline or without one), so every row names the test and the correction."""
        import csv
        import io

        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["system", "metric", "value", "delta", "p", "p_adjusted", "significant",
                    "test", "correction", "baseline"])
        for s in self.systems:
            for m in self.metrics:
                sig = self.significance.get(s.name, {}).get(m)
                w.writerow([s.name, m, repr(s.metrics[m]),
                            *((repr(sig.delta), repr(sig.p), repr(sig.p_adjusted),
                               str(sig.significant).lower()) if sig else ("", "", "", "")),
                            self.test, self.correction, self.baseline or ""])
        return buf.getvalue()

    def per_query_frame(self) -> Any:
        """Per-query values as a long pandas frame ``system, query_id, metric, value``, systems
        in order, then metric and query id sorted."""
        import pandas as pd

        rows = [(s.name, q, m, float(v)) for s in self.systems
                for m in sorted(s.per_query) for q, v in sorted(s.per_query[m].items())]
        return pd.DataFrame(rows, columns=["system", "query_id", "metric", "value"])

    def write_per_query(self, path: str | Path) -> Path:
        """:meth:`per_query_frame` to ``path``: parquet (``.parquet``, ``.pq``) or CSV
        (``.csv``) by suffix."""
        p = Path(path)
        frame = self.per_query_frame()
        if p.suffix.lower() in (".parquet", ".pq"):
            frame.to_parquet(p, index=False)
        elif p.suffix.lower() == ".csv":
            frame.to_csv(p, index=False, lineterminator="\n")
        else:
            raise ValueError(f"--per-query {p}: write .parquet or .csv")
        return p


def run_experiment(systems: Sequence[System], dataset: str, split: str, metrics: Sequence[str],
                   baseline: str | None = None, test: Test = "t",
                   correction: Correction = "holm", alpha: float = 0.05,
                   seed: int = 42) -> Experiment:
    """Compare every system with ``baseline`` (a system's name; None: no tests) on each metric's
    per-query values, queries paired by id; the p-values of one metric form one family for the
    correction. Raises ``ValueError`` naming the choices for an unknown baseline, test or
    correction, or two systems with one name."""
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
        raise ValueError(f"--baseline {baseline!r} is not a system; choose one of "
                         f"{', '.join(names)}")
    significance: dict[str, dict[str, Significance]] = {}
    if baseline is not None:
        base = next(s for s in systems if s.name == baseline)
        others = [(s.name, s.per_query) for s in systems if s.name != baseline]
        # the one route aiblox compare and the sweep take: adjusted within a metric, wins
        # under the metric's direction
        for c in compare_to_baseline(base.per_query, others, metrics, _STAT[test], alpha, seed,
                                     correction):
            significance.setdefault(c.candidate, {})[c.metric] = Significance(
                delta=c.delta, p=c.p_value, p_adjusted=c.p_holm, significant=c.significant,
                wins=c.wins, ties=c.ties, losses=c.losses)
    return Experiment(dataset=dataset, split=split, metrics=list(metrics), test=test,
                      correction=correction, alpha=alpha, baseline=baseline,
                      systems=list(systems), significance=significance)


def _md(text: str) -> str:
    """Markdown table text: ``|`` escaped."""
    return text.replace("|", "\\|")


_TEX = {"\\": "\\textbackslash{}", "&": "\\&", "%": "\\%", "$": "\\$", "#": "\\#",
        "_": "\\_", "{": "\\{", "}": "\\}", "~": "\\textasciitilde{}",
        "^": "\\textasciicircum{}"}


def _tex(text: str) -> str:
    """LaTeX text with its special characters escaped."""
    return "".join(_TEX.get(c, c) for c in text)


def _plural(n: int, word: str, words: str | None = None) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {words or word + 's'}"
