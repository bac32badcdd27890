"""Sweep reports: a self-contained HTML page and a Markdown summary of one logged sweep.

Read from MLflow alone (the parent run, its ``sweep_summary.json`` and its child runs): the
leaderboard (tune and report metrics, each point's delta to the baseline), the primary metric as
a function of each swept parameter (one plot per axis, named as the spec names it, one line per
blend, over the points the parameter applies to only: of the points holding a value, the one
best on tune, with its tune and report values, so the report split is never chosen on; a
categorical axis drawn as categories, without a line between them; an axis grouping the points
exactly as an earlier one is left out), the tune-versus-report table of the chosen point, the
significance table (each metric's direction and win/tie/loss under it,
:mod:`aiblox.metrics.directions`; deltas marked as :mod:`aiblox.metrics.marks` says), the
manifest hashes
of the best point, and the one command that reproduces the sweep. A spec with ``[search]
objectives`` adds its Pareto front on the tune split (a table, and one plot of the primary
metric against each other objective: every point, the front, the chosen point).
The HTML needs no network: CSS is inline and plots are inline base64 PNGs (matplotlib, Agg
backend). Both files are logged as artifacts of the parent run (``report/``).
"""

from __future__ import annotations

import html
import json
import shlex
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from aiblox.engine.applies import series_of, setting_applies
from aiblox.engine.settings import ranking_order
from aiblox.engine.tracking import (
    MANIFEST,
    child_runs,
    find_sweep_run,
    metric_key,
    read_json,
    tracking_client,
)
from aiblox.engine.tracking.layout import (
    TAG_OUTSIDE_GRID,
    TAG_RERUN_OPTIONS,
    TAG_SPEC_PATH,
    TAG_WORKDIR,
    rerun_command,
)
from aiblox.hashing import short_hash
from aiblox.metrics.directions import metric_direction
from aiblox.metrics.marks import (
    adjusted_text,
    counts_text,
    delta_text,
    legend,
    p_text,
    value_text,
)
from aiblox.metrics.significance import TEST_NAMES
from aiblox.sweep.report_plots import axis_png, pareto_png, value_key

__all__ = ["SweepReport", "find_sweep_run", "load_sweep_report", "render_html",
           "render_markdown", "write_report"]

_SKIP_PARAMS = ("dataset_hash", "policy_sha256")
_CSS = """body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1100px}
table{border-collapse:collapse;margin:1em 0;font-size:.9em}
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left}
th{background:#f2f2f2}tr.best td{background:#e8f5e9;font-weight:600}
code,pre{background:#f6f6f6;padding:.1em .3em}pre{padding:.8em;overflow-x:auto}
.plots img{max-width:48%;margin:.5em .5%}"""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class SweepReport(_Strict):
    """Everything a report shows, read from MLflow."""

    name: str
    """Sweep name."""
    parent_run_id: str
    """MLflow parent run id."""
    tracking_uri: str
    """Tracking URI the sweep was read from."""
    tune_split: str
    """Split the best point was chosen on."""
    report_split: str | None
    """Split the best point is reported on (None: a cross-validated sweep of one split)."""
    primary: str
    """Metric the choice was made by."""
    metrics: list[str]
    """Metric names."""
    best: dict[str, Any]
    """The chosen point (``sweep_summary.json``'s ``best``)."""
    leaderboard: list[dict[str, Any]]
    """Points by tune primary metric, descending (ties by config hash)."""
    significance: list[dict[str, Any]] = Field(default_factory=list)
    """Candidate-against-baseline comparisons (Holm-adjusted)."""
    ci: dict[str, Any] = Field(default_factory=dict)
    """Per split ``(mean, low, high)`` bootstrap interval of the best point's primary metric."""
    axes: dict[str, list[dict[str, Any]]] = Field(default_factory=dict)
    """Swept parameter -> rows ``{series, value, tune, report, n}``: of the ``n`` points of a
    series (their blend; ``all`` for the blend axis) holding the value, the one best on tune
    (primary metric), its tune and report values. Only points the parameter applies to count
    (``rrf_k`` for RRF points, ``w_text`` for linear ones, a chunk size where the chunker
    takes one; :mod:`aiblox.engine.applies`)."""
    axis_names: dict[str, str] = Field(default_factory=dict)
    """Swept parameter (its MLflow param, the key of :attr:`axes`) -> the name the spec gives
    its axis (``prefs.fts.top_k`` -> ``depth``), which plots and headings show."""
    baseline: dict[str, Any] | None = None
    """The baseline point's leaderboard row (``label``, ``config_hash``, ``metrics``), None
    without a baseline."""
    manifest: dict[str, Any] = Field(default_factory=dict)
    """Hashes of the best point's manifest."""
    pareto: dict[str, Any] = Field(default_factory=dict)
    """Quality against cost (``sweep_summary.json``'s ``pareto``, empty without ``[search]
    objectives``): ``objectives`` (``[name, direction]`` pairs, in order), ``front`` (config
    hashes, best first by the primary metric) and ``points`` (each point's objective values on
    tune and report, in the objectives' order)."""
    sweep_hash: str
    """sha256 of the spec (tag ``aiblox.sweep_hash``): the spec file to rerun must hash to it
    (where its data and store lie and its description are not hashed: the data is named by its
    own hash, :attr:`manifest`'s ``dataset_hash``)."""
    reproduce: str
    """One command that reproduces the sweep from the folder the report is made in (the spec
    path and the folder the sweep ran in are tagged on the parent run). Never with a password:
    a URL's is read from an environment variable (``--db "$AIBLOX_DB"``, a comment at the end
    saying what it holds)."""
    best_deleted_run_id: str | None = None
    """The best point's run id when that run was deleted from the store after the sweep (the
    report still shows the sweep's record of it; its manifest hashes are gone with it)."""
    cv: dict[str, Any] | None = None
    """``[cv]``: the k-fold table (``sweep_summary.json``'s ``cv``; see
    :class:`~aiblox.sweep.crossval.CrossValidation`), None without."""

    @property
    def splits(self) -> list[str]:
        """Tune, then report if any."""
        return [self.tune_split] + ([self.report_split] if self.report_split else [])

    def axis_name(self, axis: str) -> str:
        """The spec's name of a swept parameter (the parameter itself when the spec has no
        other)."""
        return self.axis_names.get(axis, axis)


def _children(client: Any, parent: Any) -> list[Any]:
    return child_runs(client, parent)


def _adjusted_named(c: dict[str, Any]) -> dict[str, Any]:
    """A logged comparison with its adjusted p as ``p_adjusted`` (``p_holm`` in summaries
    logged before it was renamed)."""
    return c if "p_adjusted" in c else {**c, "p_adjusted": c.get("p_holm")}


def _reproduce(name: str, tracking_uri: str, spec_path: str | None = None,
               options: str = "", workdir: str | None = None) -> str:
    """The command that reruns the sweep from this working folder: the spec file it was run
    from (tagged on the parent run), or ``evals/sweeps/<name>.toml`` for sweeps logged before
    the tag existed, with the store, stage cache and device options it was run with (tagged
    too, when not defaults). The spec path, those options and the spec's own relative paths
    (``dataset``, ``db``, ``vectors``) are relative to the folder the sweep ran in (tag
    ``aiblox.workdir``; a parent logged before it: the command as tagged): from another
    folder the command goes there first, ``cd DIR && aiblox sweep ...`` (DIR relative when it
    lies under this folder, else absolute), naming a local tracking store by its absolute
    path, so that it is still the store read here. An option holding a URL's password (the
    store's, the tracking server's) reads it from an environment variable instead
    (:func:`~aiblox.engine.tracking.layout.rerun_command`)."""
    path = spec_path or (Path("evals") / "sweeps" / f"{name}.toml").as_posix()
    cd, uri = "", tracking_uri
    here = Path.cwd().resolve()
    if workdir is not None and Path(workdir) != here:
        there = Path(workdir)
        shown = there.relative_to(here).as_posix() if there.is_relative_to(here) else workdir
        cd, uri = f"cd {shlex.quote(shown)} && ", _absolute_uri(tracking_uri)
    return rerun_command(f"{cd}aiblox sweep {shlex.quote(path)}", options, "--tracking-uri", uri)


def _absolute_uri(uri: str) -> str:
    """A tracking URI naming the same store from any folder: a local store's relative path
    (``sqlite:///mlruns/mlflow.db``, ``file:mlruns``, ``mlruns``) made absolute; a server's,
    and an absolute path, as they are."""
    for scheme in ("sqlite:///", "file://", "file:"):
        if uri.startswith(scheme):
            rest = uri.removeprefix(scheme)
            return uri if rest.startswith("/") else f"{scheme}{Path(rest).resolve().as_posix()}"
    return uri if "://" in uri else Path(uri).resolve().as_posix()


def _applies(key: str, params: dict[str, str]) -> bool:
    """Whether the logged param ``key`` applies to a child with ``params`` (see
    :mod:`aiblox.engine.applies`): fusion settings by blend, chunking settings by chunker."""
    group, _, setting = key.rpartition(".")
    if group not in ("prefs.scoring", "prefs.chunking"):
        return True
    return setting_applies(setting, mode=params.get("prefs.mode"),
                           blend=params.get("prefs.scoring.blend"),
                           chunker_id=params.get("prefs.chunking.chunker_id"))


def _series(key: str, params: dict[str, str]) -> str:
    """A point's line in a parameter's plot: its pipeline's shape for a pipeline point (all
    points for the ``pipeline`` axis itself), else its blend (:func:`series_of`)."""
    if "pipeline" in params:
        return "all" if key == "pipeline" else params["pipeline"]
    return series_of(key.rpartition(".")[2], mode=params.get("prefs.mode"),
                     blend=params.get("prefs.scoring.blend"))


def _axes(children: list[Any], tk: str, rk: str | None, primary: str
          ) -> dict[str, list[dict[str, Any]]]:
    """Swept params -> rows ``{series, value, n, tune, report}``: among the children where the
    param applies, per series (blend) and value, the one best on tune (ties by config hash)."""
    keys = sorted({k for c in children for k in c.data.params})
    axes: dict[str, list[dict[str, Any]]] = {}
    seen: set[frozenset[frozenset[str]]] = set()
    for k in keys:
        if k.endswith(_SKIP_PARAMS):
            continue
        # the grid's points (a baseline scored as a point of its own is not one of them)
        pts = [c for c in children if k in c.data.params and _applies(k, c.data.params)
               and c.data.tags.get(TAG_OUTSIDE_GRID) != "true"]
        values = {c.data.params[k] for c in pts}
        if len(values) < 2:
            continue
        # an axis that splits the points exactly as an earlier one (w_vec = 1 - w_text, the
        # vector depth beside the full-text depth) adds no plot
        groups = frozenset(frozenset(c.info.run_id for c in pts if c.data.params[k] == v)
                           for v in values)
        if groups in seen:
            continue
        seen.add(groups)
        rows = []
        for series in sorted({_series(k, c.data.params) for c in pts}):
            for v in sorted(values, key=value_key):
                group = [c for c in pts if c.data.params[k] == v
                         and _series(k, c.data.params) == series]
                if not group:
                    continue
                # the point best on tune (ties by config hash): the report split never chooses
                top = min(group, key=lambda c: ranking_order(
                    c.data.metrics.get(tk), c.data.tags.get("aiblox.config_hash", ""),
                    primary))
                rows.append({"series": series, "value": v, "n": len(group),
                             "tune": top.data.metrics.get(tk),
                             "report": top.data.metrics.get(rk) if rk else None})
        axes[k] = rows
    return axes


_DEPTHS = {"prefs.fts.top_k": "fts_depth", "prefs.vector.top_k": "vector_depth"}
"""The per-signal depth params and their axes (``depth`` sweeps both at once)."""


def spec_axis_name(param: str, grid: set[str]) -> str:
    """The name a spec gives the axis of a logged ``param``: a setting's own name
    (``prefs.scoring.w_text`` is ``w_text``, ``prefs.chunking.chunker_id`` is ``chunker_id``,
    ``selection.params.max_chunks`` is ``max_chunks``, ``selection.policy`` is ``policy``), a
    pipeline stage's parameter as its stage axis (``pipeline.rm3.fb_terms`` is
    ``rm3.fb_terms``), a depth as the spec's ``grid`` swept it (``depth``, else ``fts_depth`` /
    ``vector_depth``); any other param as it is."""
    if param in _DEPTHS:
        return "depth" if "depth" in grid or _DEPTHS[param] not in grid else _DEPTHS[param]
    if param.startswith("pipeline."):
        return param.removeprefix("pipeline.")
    for head in ("prefs.", "selection.params.", "selection."):
        if param.startswith(head):
            return param.rpartition(".")[2]
    return param


def load_sweep_report(sweep: str, tracking_uri: str) -> SweepReport:
    """Read a logged sweep (parent run id or sweep name) into a :class:`SweepReport`."""
    client = tracking_client(tracking_uri)  # a reader: a missing store is an error
    parent = find_sweep_run(client, sweep)
    pid = parent.info.run_id
    summary = read_json(client, pid, "sweep_summary.json", parent)
    if summary is None:
        raise ValueError(f"sweep run {pid} has no sweep_summary.json (unfinished?)")
    p = parent.data.params
    name = p.get("spec.name") or parent.data.tags.get("aiblox.sweep_name", sweep)
    tune, report = p["spec.tune_split"], p.get("spec.report_split")
    if report == "None" and report not in summary["best"]["metrics"]:
        report = None  # a cross-validated spec without a report split (logged as "None")
    primary = p["spec.primary"]
    metrics = json.loads(p["spec.metrics"]) if p.get("spec.metrics", "").startswith("[") \
        else [primary]
    children = _children(client, parent)
    axes = _axes(children, metric_key(tune, primary),
                 metric_key(report, primary) if report else None, primary)
    grid = {k.removeprefix("spec.grid.").split(".")[0] for k, v in p.items()
            if k.startswith("spec.grid.") and v != "None"}
    best = summary["best"]
    base_hash = next((c.data.tags.get("aiblox.config_hash") for c in children
                      if c.data.tags.get("aiblox.baseline") == "true"), None)
    baseline = next((r for r in summary.get("leaderboard", [])
                     if base_hash is not None and r["config_hash"] == base_hash), None)
    manifest: dict[str, Any] = {}
    best_child = next((c for c in children
                       if c.data.tags.get("aiblox.config_hash") == best["config_hash"]), None)
    if best_child is not None:
        try:  # the report still shows the tags without it
            m = read_json(client, best_child.info.run_id, MANIFEST, best_child) or {}
        except (OSError, ValueError):
            m = {}
        manifest = {"run_id": best_child.info.run_id,
                    "config_hash": best["config_hash"],
                    "dataset_hash": m.get("dataset_hash",
                                          best_child.data.tags.get("aiblox.dataset_hash")),
                    "manifest_hash": best_child.data.tags.get("aiblox.manifest_hash"),
                    "git_commit": (m.get("environment") or {}).get("git_commit"),
                    "embedder": (m.get("config") or {}).get("embedder"),
                    "embedder_name": m.get("embedder_name"),
                    "splits": {s: {"run_hash": sm.get("run_hash"),
                                   "stages": [{k: st.get(k) for k in ("name", "key", "output")
                                               if k in st} for st in sm.get("stages", [])]}
                               for s, sm in sorted((m.get("splits") or {}).items())}}
    gone = None
    if best_child is None:
        from aiblox.sweep.runs import deleted_point_run

        gone = deleted_point_run(client, parent, best["config_hash"])
    return SweepReport(name=name, parent_run_id=pid, best_deleted_run_id=gone,
                       tracking_uri=tracking_uri, tune_split=tune,
                       report_split=report, primary=primary, metrics=metrics, best=best,
                       leaderboard=summary.get("leaderboard", []),
                       significance=[_adjusted_named(c)
                                     for c in summary.get("significance", [])],
                       ci=summary.get("ci", {}),
                       axes=axes, axis_names={k: spec_axis_name(k, grid) for k in axes},
                       baseline=baseline, manifest=manifest, pareto=summary.get("pareto", {}),
                       sweep_hash=parent.data.tags.get("aiblox.sweep_hash", ""),
                       cv=summary.get("cv"),
                       reproduce=_reproduce(name, tracking_uri,
                                            parent.data.tags.get(TAG_SPEC_PATH),
                                            parent.data.tags.get(TAG_RERUN_OPTIONS, ""),
                                            parent.data.tags.get(TAG_WORKDIR)))


def _pareto_table(rep: SweepReport) -> tuple[str, list[str], list[list[str]]]:
    par = rep.pareto
    directions = dict(par["objectives"])
    by_hash = {p["config_hash"]: p for p in par["points"]}
    head = ["#", "label", "config hash"] + [
        f"{s} {n} ({'max' if d == 'maximize' else 'min'})"
        for s in rep.splits for n, d in directions.items()]
    rows = [[str(i), by_hash[h]["label"], short_hash(h)] + [
        _count_or_f(v) for key in ("tune", "report") for v in by_hash[h][key]]
        for i, h in enumerate(par["front"], start=1)]
    return (f"Pareto front ({rep.tune_split}; the chosen point is the front's best by "
            f"{rep.primary})", head, rows)


def _f(v: Any) -> str:
    return value_text(v) if isinstance(v, float) else str(v)


def _count_or_f(v: Any) -> str:
    """A count (tokens, candidates: a whole number above 1) as an integer, else :func:`_f`."""
    return str(int(v)) if isinstance(v, float) and v.is_integer() and abs(v) >= 2 else _f(v)


def _tables(rep: SweepReport, top: int) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, header, rows) of every table, shared by HTML and Markdown."""
    # a pipeline sweep may choose by a chunk or answer metric outside the ranx metrics: shown first
    shown = rep.metrics if rep.primary in rep.metrics else [rep.primary, *rep.metrics]
    splits = rep.splits
    lb_head = ["#", "label", "config hash"] + [f"{s} {m}" for s in splits for m in shown]
    # the chosen point marked: with [search] objectives the Pareto front's best, which the
    # ranking by the primary alone may put below others (the order stays the ranking)
    lb = [[str(i), r["label"] + (" (chosen)" if r["config_hash"] == rep.best["config_hash"]
                                 else ""), short_hash(r["config_hash"])] + [
        _f(r["metrics"].get(s, {}).get(m, "")) for s in splits
        for m in shown] for i, r in enumerate(rep.leaderboard[:top], start=1)]
    if rep.baseline is not None:  # each point's delta to the baseline; marked where tested
        against = rep.report_split or rep.tune_split
        # [cv] alone tests no point (each was tuned on the split it would be tested on): the
        # test is the cross-validated margin's, so the cells are deltas and say why
        untested = ", untested: see the cross-validated margin" \
            if rep.cv is not None and rep.report_split is None else ""
        correction = rep.significance[0].get("correction", "holm") if rep.significance \
            else "none"
        adjusted = f", p {adjusted_text(correction)}" \
            if correction != "none" and not untested else ""
        lb_head.append(f"vs baseline ({against} {rep.primary}{untested}{adjusted})")
        tested = {c["candidate"]: c for c in rep.significance if c["metric"] == rep.primary}
        base = rep.baseline["metrics"].get(against, {}).get(rep.primary)
        for row, r in zip(lb, rep.leaderboard[:top], strict=True):
            c = tested.get(r["label"])
            value = r["metrics"].get(against, {}).get(rep.primary)
            row.append("baseline" if r["config_hash"] == rep.baseline["config_hash"] else
                       f"{delta_text(c['delta'], c['significant'])} "
                       f"p={p_text(c['p_adjusted'], c.get('alpha', 0.05))}"
                       if c is not None else
                       delta_text(value - base) if value is not None and base is not None
                       else "")
    tvr = [[m, *(_f(rep.best["metrics"][s].get(m, "")) for s in splits)] for m in shown]
    if rep.ci:
        tvr.append([f"{rep.primary} 95% bootstrap CI"] + [
            f"[{rep.ci[s][1]:.4f}, {rep.ci[s][2]:.4f}]" if s in rep.ci else ""
            for s in splits])
    if rep.report_split is not None:
        gap = (rep.best["metrics"][rep.tune_split][rep.primary]
               - rep.best["metrics"][rep.report_split][rep.primary])
        tvr.append([f"{rep.primary} gap (tune minus report)", "", f"{gap:+.4f}"])
    # the direction as the library declares it (a summary logged before it carried one)
    sig = [[c["candidate"], c["metric"], c.get("direction") or metric_direction(c["metric"]),
            _f(c["baseline_mean"]), _f(c["candidate_mean"]),
            delta_text(c["delta"], c["significant"]),
            p_text(c["p_value"], c.get("alpha", 0.05)),
            p_text(c["p_adjusted"], c.get("alpha", 0.05)),
            counts_text(c["wins"], c["ties"], c["losses"], c.get("dropped", 0))]
           for c in rep.significance]
    first = rep.significance[0] if rep.significance else {}
    tested = TEST_NAMES.get(first.get("test", "student"), first.get("test", ""))
    corrected = adjusted_text(first.get("correction", "holm"))
    man = rep.manifest
    mrows = [[k, str(man.get(k))] for k in ("config_hash", "dataset_hash", "manifest_hash",
                                           "git_commit", "run_id", "embedder", "embedder_name")
             if k in man]
    for split, sm in man.get("splits", {}).items():
        mrows.append([f"run hash ({split})", str(sm["run_hash"])])
        for st in sm["stages"]:
            mrows.append([f"stage {st.get('name')} ({split})", str(st.get("key"))])
    tables = [
        (f"Leaderboard (by {rep.tune_split} {rep.primary}"
         + (f"; the first {top} of {len(rep.leaderboard)} points, all in aiblox runs "
            f"{rep.name})" if len(rep.leaderboard) > top else ")"), lb_head, lb),
        (f"Tune ({rep.tune_split}) versus report ({rep.report_split}): {rep.best['label']}"
         if rep.report_split else f"Chosen on all of {rep.tune_split}: {rep.best['label']}",
         ["metric", *splits], tvr)]
    if rep.pareto:
        tables.insert(1, _pareto_table(rep))
    if rep.cv is not None:
        tables += _cv_tables(rep.cv)
    if rep.report_split is not None:
        tables.append((f"Significance against the baseline ({rep.report_split}, {tested}, "
                       f"{corrected} over the points per metric; W/T/L under the metric's "
                       f"direction; {legend('the baseline', first.get('alpha', 0.05))})",
                       ["candidate", "metric", "better", "baseline", "candidate", "delta", "p",
                        "p (adjusted)", "W/T/L"], sig))
    tables.append(("Manifest hashes of the best point", ["field", "value"], mrows))
    return tables


def _cv_tables(cv: dict[str, Any]) -> list[tuple[str, list[str], list[list[str]]]]:
    """The k-fold table and the cross-validated margin against the baseline."""
    rows = [[str(r["fold"]), str(r["n_held_out"]), r["label"], short_hash(r["config_hash"]),
             _f(r["tune"]), _f(r["held_out"]), f"{r['gap']:+.4f}",
             "" if r.get("baseline_held_out") is None else _f(r["baseline_held_out"])]
            for r in cv["rows"]]
    base = [r["baseline_held_out"] for r in cv["rows"] if r.get("baseline_held_out") is not None]
    rows.append(["mean (over folds)", "", "", "", _f(cv["mean_tune"]), _f(cv["mean_held_out"]),
                 f"{cv['mean_gap']:+.4f}", _f(sum(base) / len(base)) if base else ""])
    out = [(f"{cv['folds']}-fold cross-validation over {cv['split']} ({cv['n_queries']} "
            f"queries, seed {cv['seed']}): chosen on the other folds, scored on the held-out "
            f"fold ({cv['metric']})",
            ["fold", "held-out queries", "chosen point", "config hash", "tune (other folds)",
             "held-out", "gap (tune - held-out)", "baseline (held-out fold)"], rows)]
    verdict = [["cross-validated score (mean over queries)", _f(cv["pooled_held_out"])]]
    if cv.get("margin") is not None:
        verdict += [["baseline", f"{cv['baseline']} {_f(cv['baseline_mean'])}"],
                    ["margin (cross-validated - baseline)", f"{cv['margin']:+.4f}"],
                    ["95% interval", f"[{cv['margin_low']:+.4f}, {cv['margin_high']:+.4f}] "
                                     f"({cv['ci_method']})"],
                    [f"p ({cv['test']} paired test)", f"{cv['p_value']:.4g}"],
                    ["W/T/L (queries)", f"{cv['wins']}/{cv['ties']}/{cv['losses']}"]]
    verdict.append(["verdict", cv["verdict"]])
    out.append(("Cross-validated choice against the baseline", ["", "value"], verdict))
    return out


def _deleted_note(rep: SweepReport) -> str:
    return (f"The best point's run ({rep.best_deleted_run_id}) was deleted from the tracking "
            f"store after the sweep: the tables are the sweep's record of it; `mlflow runs "
            f"restore --run-id {rep.best_deleted_run_id}` brings it back.")


def _axis_tables(rep: SweepReport) -> dict[str, tuple[list[str], list[list[str]]]]:
    """Per swept parameter: (header, rows) of the point best on the tune split at each value
    (one series per blend, or per pipeline shape), shared by HTML and Markdown."""
    head = ["series", "value", "points", f"{rep.tune_split} (tune)"] + (
        [f"{rep.report_split} (report)"] if rep.report_split else [])
    return {axis: (head, [[str(r.get("series", "all")), str(r["value"]), str(r["n"]),
                           _f(r["tune"])] + ([_f(r["report"])] if rep.report_split else [])
                          for r in axis_rows])
            for axis, axis_rows in rep.axes.items()}


def render_markdown(rep: SweepReport, top: int = 20) -> str:
    """The Markdown summary."""
    out = [f"# Sweep report: {rep.name}", "",
           f"Best on {rep.tune_split} by {rep.primary}: **{rep.best['label']}** "
           f"(config `{rep.best['config_hash']}`), MLflow parent run `{rep.parent_run_id}`.", ""]
    if rep.best_deleted_run_id:
        out += [f"**{_deleted_note(rep)}**", ""]
    if rep.cv is not None:
        out += [f"**{rep.cv['verdict']}**", ""]
    for title, head, rows in _tables(rep, top):
        out += [f"## {title}", ""]
        if not rows:
            out += ["(none)", ""]
            continue
        out.append("| " + " | ".join(head) + " |")
        out.append("|" + "---|" * len(head))
        out += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows]
        out.append("")
    out += ["## Swept parameters", "", "Plots are in the HTML report: " +
            ", ".join(f"`{rep.axis_name(a)}`" for a in rep.axes) if rep.axes
            else "(no swept parameter)", ""]
    if rep.axes:
        out += [f"Per value, among the points a parameter applies to (one series per blend, "
                f"or per pipeline shape), "
                f"the point best on {rep.tune_split} by {rep.primary}:", ""]
    for axis, (head, rows) in _axis_tables(rep).items():
        name = rep.axis_name(axis)
        logged = f" (MLflow param `{axis}`)" if name != axis else ""
        out += [f"### {name}{logged}", "", "| " + " | ".join(head) + " |",
                "|" + "---|" * len(head)]
        out += ["| " + " | ".join(r) + " |" for r in rows]
        out.append("")
    out += ["## Reproduce", "", "```sh", rep.reproduce, "```", "",
            f"The spec must hash to `{rep.sweep_hash}` (MLflow tag `aiblox.sweep_hash`); "
            "its stage cache makes the rerun cheap.", ""]
    return "\n".join(out)


def render_html(rep: SweepReport, top: int = 20) -> str:
    """The self-contained HTML report (inline CSS, inline base64 PNG plots, no scripts)."""
    e = html.escape
    best_hash = short_hash(rep.best["config_hash"])
    parts = ["<!DOCTYPE html>", "<html lang=\"en\"><head><meta charset=\"utf-8\">",
             f"<title>Sweep report: {e(rep.name)}</title><style>{_CSS}</style></head><body>",
             f"<h1>Sweep report: {e(rep.name)}</h1>",
             f"<p>Best on <b>{e(rep.tune_split)}</b> by <b>{e(rep.primary)}</b>: "
             f"<b>{e(rep.best['label'])}</b> (config <code>{e(rep.best['config_hash'])}</code>),"
             f" MLflow parent run <code>{e(rep.parent_run_id)}</code>.</p>"]
    if rep.best_deleted_run_id:
        parts.append(f"<p><b>{e(_deleted_note(rep))}</b></p>")
    if rep.cv is not None:  # as the Markdown gives it
        parts.append(f"<p><b>{e(rep.cv['verdict'])}</b></p>")
    tables = _tables(rep, top)
    for i, (title, head, rows) in enumerate(tables):
        parts.append(f"<h2>{e(title)}</h2>")
        if not rows:
            parts.append("<p>(none)</p>")
        else:
            parts.append("<table><tr>" + "".join(f"<th>{e(h)}</th>" for h in head) + "</tr>")
            for r in rows:
                cls = ' class="best"' if i == 0 and r[2] == best_hash else ""
                parts.append(f"<tr{cls}>" + "".join(f"<td>{e(c)}</td>" for c in r) + "</tr>")
            parts.append("</table>")
        if i == 0:
            parts.append("<h2>Metric by swept parameter</h2><div class=\"plots\">")
            for axis in rep.axes:
                parts.append(f"<img alt=\"{e(rep.primary)} by {e(rep.axis_name(axis))}\" "
                             f"src=\"data:image/png;base64,{axis_png(rep, axis)}\">")
            parts.append("</div>")
            if rep.axes:  # the plotted values as numbers, as the Markdown gives them
                parts.append(f"<p>Per value, among the points a parameter applies to, the "
                             f"point best on {e(rep.tune_split)} by {e(rep.primary)}:</p>")
            for axis, (head, rows) in _axis_tables(rep).items():
                parts.append(f"<h3>{e(rep.axis_name(axis))}</h3><table><tr>"
                             + "".join(f"<th>{e(h)}</th>" for h in head) + "</tr>"
                             + "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in r)
                                       + "</tr>" for r in rows) + "</table>")
        if rep.pareto and title.startswith("Pareto front"):
            parts.append("<div class=\"plots\">")
            for cost, _ in rep.pareto["objectives"]:
                if cost != rep.primary:
                    parts.append(f"<img alt=\"{e(rep.primary)} against {e(cost)}\" "
                                 f"src=\"data:image/png;base64,{pareto_png(rep, cost)}\">")
            parts.append("</div>")
    parts += ["<h2>Reproduce</h2>", f"<pre>{e(rep.reproduce)}</pre>",
              f"<p>The spec must hash to <code>{e(rep.sweep_hash)}</code> (MLflow tag "
              "<code>aiblox.sweep_hash</code>).</p>", "</body></html>"]
    return "\n".join(parts) + "\n"


def write_report(sweep: str, tracking_uri: str, out_dir: str | Path,
                 log_artifacts: bool = True, top: int = 20) -> dict[str, Any]:
    """Write ``report.html`` and ``report.md`` of a sweep to ``out_dir``; log both as artifacts
    (``report/``) of the parent run. Returns paths, parent run id and best config hash."""
    rep = load_sweep_report(sweep, tracking_uri)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    html_path, md_path = out / "report.html", out / "report.md"
    html_path.write_text(render_html(rep, top), encoding="utf-8")
    md_path.write_text(render_markdown(rep, top), encoding="utf-8")
    if log_artifacts:
        client = tracking_client(tracking_uri)
        client.log_artifact(rep.parent_run_id, str(html_path), "report")
        client.log_artifact(rep.parent_run_id, str(md_path), "report")
    return {"html": str(html_path), "markdown": str(md_path), "parent_run_id": rep.parent_run_id,
            "best_config_hash": rep.best["config_hash"], "axes": sorted(rep.axes),
            "reproduce": rep.reproduce}
