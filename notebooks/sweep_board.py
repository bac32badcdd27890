# /// script
# requires-python = ">=3.11"
# dependencies = [
#     "aiblox[notebooks]",
#     "marimo>=0.9",
#     "matplotlib>=3.8",
# ]
#
# [tool.uv.sources]
# aiblox = { path = "..", editable = true }
# ///
"""Sweep board: run a sweep spec (cached stages) and look at it: leaderboard, the metric along
each swept setting, tune against report, quality against cost (the Pareto front), significance
and the hashes that reproduce the best."""

import marimo

__generated_with = "0.25.2"
app = marimo.App(width="medium", app_title="aiblox sweep board")


@app.cell
def _():
    import shlex
    from pathlib import Path

    import marimo as mo
    import matplotlib.pyplot as plt

    import aiblox
    from aiblox.explore import default_db
    from aiblox.sweep import (
        axis_frame,
        leaderboard,
        load_spec,
        manifest_frame,
        pareto_frame,
        run_sweep,
        significance_frame,
        stage_counts,
        swept_axes,
        tune_vs_report,
    )
    from aiblox.sweep.frames import CHOSEN, folds_frame
    from aiblox.sweep.runner import DEFAULT_CACHE_DIR

    return (
        CHOSEN,
        DEFAULT_CACHE_DIR,
        Path,
        aiblox,
        axis_frame,
        default_db,
        folds_frame,
        leaderboard,
        load_spec,
        manifest_frame,
        mo,
        pareto_frame,
        plt,
        run_sweep,
        shlex,
        significance_frame,
        stage_counts,
        swept_axes,
        tune_vs_report,
    )


@app.cell
def sweep_folders(DEFAULT_CACHE_DIR, Path, aiblox):
    # the specs: evals/sweeps in the first folder holding one walking up from here, else the
    # checkout's beside the installed package (so the notebook runs from any folder); the stage
    # cache: the working folder's, the one `aiblox sweep` run here uses (never the checkout's)
    specs_dir = next((f / "evals" / "sweeps" for f in (Path.cwd(), *Path.cwd().parents)
                      if (f / "evals" / "sweeps").is_dir()),
                     Path(aiblox.__file__).resolve().parents[1] / "evals" / "sweeps")
    cache_dir = Path.cwd() / DEFAULT_CACHE_DIR
    return cache_dir, specs_dir


@app.cell
def _(mo):
    mo.md("""
    # Sweep board

    Pick a sweep spec and press **run sweep** (the sample spec, seconds long, runs at once; a
    shipped spec's first run can take minutes): the sweep runs with every stage memoised in
    `.aiblox/stages` in the working folder (where `aiblox sweep` run from here memoises them),
    so a rerun reads everything back. The best point is chosen on the
    **tune** split only; the **report** split confirms it (a cross-validated spec has none:
    its k-fold held-out score is reported).
    """)
    return


@app.cell
def _(mo, specs_dir):
    _names = sorted(p.name for p in specs_dir.glob("*.toml"))
    spec_file = mo.ui.dropdown(options=_names, value="sample_fusion.toml", label="sweep spec")
    run_button = mo.ui.run_button(label="run sweep")
    mo.hstack([spec_file, run_button], justify="start")
    return run_button, spec_file


@app.cell
def sweep_of_the_picked_spec(Path, cache_dir, default_db, load_spec, mo, run_button,
                             run_sweep, spec_file, specs_dir):
    # the spec as `aiblox sweep` takes it from the working folder: relative under it, else
    # absolute
    _file = (specs_dir / spec_file.value).resolve()
    _here = Path.cwd().resolve()
    spec_path = (_file.relative_to(_here) if _file.is_relative_to(_here) else _file).as_posix()
    spec = load_spec(_file)
    # picking a spec does not start it: a shipped spec's first run can take half an hour (a
    # fine-tuning one); the sample spec, seconds long, runs at once
    mo.stop(spec_file.value != "sample_fusion.toml" and not run_button.value,
            mo.md(f"`{spec_path}`: {spec.description} Press **run sweep** to run it (stages "
                  f"already in `.aiblox/stages` are read back)."))
    with mo.status.spinner(title=f"sweep {spec.name}: reading or computing its stages"):
        result = run_sweep(spec, cache_dir=cache_dir, db=spec.db or default_db(spec.dataset),
                           progress=False)
    return result, spec, spec_path


@app.cell
def _(result):
    # what is reported: the report split, else (a [cv] spec) the k-fold held-out score, as
    # `aiblox report` words it
    _cv = result.cv
    if result.report_split:
        reported = f"reported on `{result.report_split}`"
    elif _cv is not None:
        reported = (f"reported by {_cv.folds}-fold cross-validation over `{_cv.split}` "
                    f"({_cv.n_queries} queries, seed {_cv.seed}): each fold's point chosen on "
                    f"the other folds, scored on the held-out fold; cross-validated "
                    f"{_cv.metric} {_cv.pooled_held_out:.4f} (mean over queries)")
    else:
        reported = "no report split"
    return (reported,)


@app.cell
def _(mo, reported, result, spec, stage_counts):
    counts = stage_counts(result)
    _t = result.timings
    mo.vstack([
        mo.md(f"## {result.name}: {len(result.points)} points on `{result.dataset}`\n\n"
              f"{spec.description} Primary metric **{result.primary}**, chosen on "
              f"`{result.tune_split}`, {reported}."),
        mo.hstack([mo.stat(value=str(int(counts["computed"].sum())), label="stages computed"),
                   mo.stat(value=str(int(counts["reused"].sum())), label="stages reused"),
                   mo.stat(value=f"{_t.get('total_s', 0.0):.2f} s", label="sweep time",
                           caption=f"signals {_t.get('signals_s', 0.0):.2f} s, points "
                                   f"{_t.get('points_s', 0.0):.2f} s"),
                   mo.stat(value=f"{_t.get('points_per_s', 0.0):g}", label="points / s")],
                  justify="start"),
        mo.ui.table(counts, selection=None, label="stage outputs"),
    ])
    return (counts,)


@app.cell
def _(CHOSEN, leaderboard, mo, result):
    board = leaderboard(result)
    _best = result.best
    mo.vstack([
        mo.md(f"### Leaderboard\n\nBest on `{result.tune_split}`: **{_best.label}** "
              f"({result.primary} {_best.metrics[result.tune_split][result.primary]:.4f}"
              + (f"; on `{result.report_split}` "
                 f"{_best.metrics[result.report_split][result.primary]:.4f}). `tune` and "
                 f"`report` are {result.primary} on `{result.tune_split}` and "
                 f"`{result.report_split}`." if result.report_split else
                 f"). No report split: `{result.cv.folds if result.cv else 0}`-fold "
                 f"cross-validation over `{result.tune_split}`: "
                 f"{result.cv.verdict if result.cv else ''}")
              + f"\n\n`chosen` {CHOSEN} marks it; `rank` is by {result.primary} on "
                f"`{result.tune_split}` alone"
              + (", and the chosen point is the Pareto front's best of the spec's "
                 "`[search] objectives`: it may rank below points no cheaper."
                 if result.objectives else ".")),
        mo.ui.table((board if result.report_split else board.drop(columns="report")).round(4),
                    selection=None, page_size=10),
    ])
    return (board,)


@app.cell
def _(mo, result, swept_axes):
    axes = swept_axes(result)
    _options = axes or ["depth"]
    axis = mo.ui.dropdown(options=_options, value="w_text" if "w_text" in _options
                          else _options[0], label="swept setting")
    axis
    return axes, axis


@app.cell
def _(axis, axis_frame, board, plt, result):
    along = axis_frame(result, axis.value)
    _xs = along[axis.value].tolist()
    _numeric = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in _xs)
    _pos = [float(x) for x in _xs] if _numeric else list(range(len(_xs)))
    _fig, _ax = plt.subplots(figsize=(7, 3.4))
    _ax.plot(_pos, along["tune"], "o-", label=f"{result.tune_split} (tune), best per value")
    if result.report_split:
        _ax.plot(_pos, along["report"], "s--",
                 label=f"{result.report_split} (report), same point")
    _ax.plot(_pos, along["mean_tune"], ":", color="grey", label=f"{result.tune_split} mean")
    _best = result.best
    # the chosen point's value of this setting (None where its blend does not use it)
    chosen_value = board.loc[board["best"], axis.value].iloc[0]
    if chosen_value is not None and chosen_value in _xs:
        _x = _pos[_xs.index(chosen_value)]
        _ax.scatter([_x], [_best.metrics[result.tune_split][result.primary]], marker="*",
                    s=220, color="tab:red", zorder=4, label=f"chosen: {_best.label}")
    if not _numeric:
        _ax.set_xticks(_pos, [str(x) for x in _xs])
    _ax.set_xlabel(axis.value)
    _ax.set_ylabel(result.primary)
    _ax.set_title(f"{result.primary} by {axis.value}")
    _ax.grid(alpha=0.3)
    _ax.legend(fontsize=7)
    _fig.tight_layout()
    _fig
    return along, chosen_value


@app.cell
def _(along, mo, result):
    mo.ui.table((along if result.report_split
                 else along.drop(columns=["report", "mean_report"])).round(4),
                selection=None, label="per value: the point best on tune")
    return


@app.cell
def _(folds_frame, mo, plt, result, tune_vs_report):
    scatter = tune_vs_report(result)
    folds = folds_frame(result)
    if not result.report_split:
        # no report split to scatter against: the k-fold choices (aiblox report's table)
        _out = mo.vstack([
            mo.md(f"### Cross-validation: each fold's choice\n\nPer fold, the point chosen "
                  f"on the other folds (`tune`) and its {result.primary} on the held-out "
                  f"fold (`held_out`), the gap and the baseline on the fold.")
            if len(folds) else mo.md("No report split and no cross-validation: nothing "
                                     "confirms the choice."),
            mo.ui.table(folds.round(4), selection=None) if len(folds) else mo.md(""),
        ])
    else:
        _fig, _ax = plt.subplots(figsize=(4.6, 4.4))
        _ax.scatter(scatter["tune"], scatter["report"], s=18, alpha=0.6, label="points")
        _lo = float(min(scatter["tune"].min(), scatter["report"].min()))
        _hi = float(max(scatter["tune"].max(), scatter["report"].max()))
        _ax.plot([_lo, _hi], [_lo, _hi], color="grey", lw=1, ls="--", label="tune = report")
        for _flag, _marker, _color in (("best", "*", "tab:red"), ("baseline", "D", "black")):
            _rows = scatter[scatter[_flag]]
            if len(_rows):
                _ax.scatter(_rows["tune"], _rows["report"], marker=_marker,
                            s=160 if _marker == "*" else 60, color=_color, zorder=4,
                            label=f"{_flag}: {_rows['label'].iloc[0]}")
        _ax.set_xlabel(f"{result.primary} on {result.tune_split} (tune)")
        _ax.set_ylabel(f"{result.primary} on {result.report_split} (report)")
        _ax.set_title("tune vs report, every point")
        _ax.grid(alpha=0.3)
        _ax.legend(fontsize=7)
        _fig.tight_layout()
        _out = _fig
    _out
    return folds, scatter


@app.cell
def _(mo, pareto_frame, plt, result):
    # quality against cost: the spec's [search] objectives, else the primary metric against the
    # documents retrieved per query (candidates)
    front = pareto_frame(result)
    _objs = [c for c in front.columns if c not in ("label", "config_hash", "front", "best",
                                                   "baseline")]
    cost = next(c for c in _objs if c != result.primary)
    _on = front[front["front"]].sort_values([cost, result.primary])
    _fig, _ax = plt.subplots(figsize=(6, 3.4))
    _ax.scatter(front[cost], front[result.primary], s=16, alpha=0.5, label="points")
    _ax.step(_on[cost], _on[result.primary], "o-", where="post", color="tab:red",
             label=f"Pareto front ({len(_on)})")
    _best = front[front["best"]]
    _ax.scatter(_best[cost], _best[result.primary], marker="*", s=200, color="black", zorder=4,
                label=f"chosen: {result.best.label}")
    _ax.set_xlabel(cost)
    _ax.set_ylabel(f"{result.primary} on {result.tune_split}")
    _ax.set_title(f"{result.primary} against {cost}")
    _ax.grid(alpha=0.3)
    _ax.legend(fontsize=7)
    _fig.tight_layout()
    _source = ("the spec's `[search] objectives`; the chosen point is the front's best by "
               f"{result.primary}" if result.objectives else
               f"the spec sets no `[search] objectives`: {result.primary} against `candidates` "
               "(documents retrieved per query), the baseline left out")
    mo.vstack([
        mo.md(f"### Quality against cost\n\nThe points no other point beats in every "
              f"objective on `{result.tune_split}` ({_source})."),
        mo.as_html(_fig),
        mo.ui.table(front[front["front"]].round(4), selection=None, label="Pareto front"),
    ])
    return cost, front


@app.cell
def _(mo, result, significance_frame):
    significance = significance_frame(result)
    _ci = "\n".join(f"- `{s}`: {m:.4f} [{lo:.4f}, {hi:.4f}]"
                    for s, (m, lo, hi) in result.ci.items())
    _base = result.baseline.label if result.baseline is not None else None
    _cv = result.cv
    if not _base:
        _head = "### Significance\n\nThe spec names no baseline: nothing tested."
    elif result.report_split:
        _head = (f"### Significance vs baseline {_base}\n\nThe top points on "
                 f"`{result.tune_split}` against the baseline on `{result.report_split}` "
                 "(paired test, Holm-adjusted across the points per metric; `direction` says "
                 "which way is better, and W/T/L count under it: for a cost, a decrease wins, "
                 "as in `aiblox compare` and the sweep report).")
    elif _cv is not None and _cv.margin is not None:
        # no report split: the cross-validated choice against the baseline, as aiblox report
        _head = (f"### Cross-validated choice against the baseline {_base}\n\n"
                 f"- cross-validated score (mean over queries): {_cv.pooled_held_out:.4f}\n"
                 f"- baseline {_cv.baseline}: {_cv.baseline_mean:.4f}\n"
                 f"- margin (cross-validated - baseline): {_cv.margin:+.4f}, 95% interval "
                 f"[{_cv.margin_low:+.4f}, {_cv.margin_high:+.4f}] ({_cv.ci_method})\n"
                 f"- p ({_cv.test} paired test): {_cv.p_value:.4g}; W/T/L (queries) "
                 f"{_cv.wins}/{_cv.ties}/{_cv.losses}\n\n**{_cv.verdict}**")
    else:
        _head = (f"### Significance vs baseline {_base}\n\nNo report split: the points are "
                 "not tested against the baseline.")
    mo.vstack([
        mo.md(_head),
        mo.ui.table(significance.round(4), selection=None) if len(significance) else mo.md(""),
        mo.md(f"**95% bootstrap interval** of the best point's {result.primary}:\n\n{_ci}"),
    ])
    return (significance,)


@app.cell
def _(manifest_frame, mo, result, shlex, spec_path):
    hashes = manifest_frame(result.best)
    _m = result.best.manifest
    reproduce = f"aiblox sweep {shlex.quote(spec_path)}"  # from the working folder
    verify = f"aiblox eval verify {result.name}"
    mo.vstack([
        mo.md(f"### Reproduce the best point\n\nconfig hash `{_m.config_hash}`, dataset hash "
              f"`{_m.dataset_hash}`, sweep hash `{_m.sweep_hash}`, git commit "
              f"`{_m.environment.get('git_commit')}`"),
        mo.ui.table(hashes, selection=None, label="stage keys and output hashes"),
        mo.md(f"Rerun the sweep (logs it to MLflow):\n\n```bash\n{reproduce}\n```\n\n"
              f"then re-execute the best point from its logged config alone and check every "
              f"hash:\n\n```bash\n{verify}\n```"),
    ])
    return hashes, reproduce, verify


if __name__ == "__main__":
    app.run()
