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
"""Fusion explorer: move the fusion settings, watch the metrics move (cached signals)."""

import marimo

__generated_with = "0.25.2"
app = marimo.App(width="medium", app_title="aiblox fusion explorer")


@app.cell
def _():
    import time

    import marimo as mo
    import matplotlib.pyplot as plt

    from aiblox.explore import (
        available_datasets,
        available_embedders,
        baseline_prefs,
        fitting_metrics,
        fusion_prefs,
        log_fusion_point,
        moved_queries,
        notebook_tracking_uri,
        open_notebook_workspace,
        score_point,
        split_choices,
        weight_curve,
    )

    return (
        available_datasets,
        available_embedders,
        baseline_prefs,
        fitting_metrics,
        fusion_prefs,
        log_fusion_point,
        mo,
        moved_queries,
        notebook_tracking_uri,
        open_notebook_workspace,
        plt,
        score_point,
        split_choices,
        time,
        weight_curve,
    )


@app.cell
def _(mo):
    mo.md("""
    # Fusion explorer

    The full-text and vector lists of every query are computed **once** per dataset and
    embedder; each change below only re-fuses those cached lists and scores the run with ranx.
    """)
    return


@app.cell
def _(available_datasets, available_embedders, mo):
    dataset = mo.ui.dropdown(options=available_datasets(), value="sample", label="dataset")
    embedder = mo.ui.dropdown(options=available_embedders(), value="hashing", label="embedder")
    backend = mo.ui.dropdown(options=["duckdb"], value="duckdb", label="backend")
    return backend, dataset, embedder


@app.cell
def _(dataset, mo, split_choices):
    # the dataset's judged splits: test when it has one, else its first
    _splits, _default = split_choices(dataset.value)
    split = mo.ui.dropdown(options=_splits, value=_default, label="split")
    return (split,)


@app.cell
def _(backend, dataset, embedder, mo, split):
    mo.hstack([dataset, embedder, backend, split], justify="start")
    return


@app.cell
def _(backend, dataset, embedder, mo, open_notebook_workspace, split, time):
    _t0 = time.perf_counter()
    with mo.status.spinner(title="loading the dataset and computing signals"):
        ws = open_notebook_workspace(dataset.value, embedder.value, split=split.value,
                                     max_depth=100, backend=backend.value)
    signals_s = time.perf_counter() - _t0
    mo.md(f"**{ws.dataset.name}/{ws.split}**: {len(ws.queries)} queries, "
          f"{len(ws.dataset.corpus)} documents, signals computed in {signals_s:.2f} s "
          f"(`{ws.embedder.model_id}`, `{ws.db}`)")
    return (ws,)


@app.cell
def _(mo):
    blend = mo.ui.radio(options=["rrf", "linear"], value="linear", label="blend", inline=True)
    # under rrf too: the two lists' RRF weights are 2 * w_text and 2 * (1 - w_text), so only
    # 0.5 is plain RRF (the baseline's), unlike `aiblox eval --blend rrf`, which reads no weight
    w_text = mo.ui.slider(0.0, 1.0, step=0.05, value=0.3,
                          label="w_text (text share; with rrf, 0.5 = plain RRF)",
                          show_value=True)
    rrf_k = mo.ui.slider(0, 200, step=5, value=60, label="RRF k", show_value=True)
    normalize = mo.ui.dropdown(options=["minmax", "zscore", "sigmoid", "none"],
                               value="minmax", label="normalisation")
    missing = mo.ui.dropdown(options=["zero", "list_min"], value="zero",
                             label="missing document")
    depth = mo.ui.slider(10, 100, step=5, value=100, label="depth", show_value=True)
    return blend, depth, missing, normalize, rrf_k, w_text


@app.cell
def _(blend, depth, fitting_metrics, fusion_prefs, missing, mo, normalize, rrf_k, w_text):
    # only the metrics a run this deep computes: recall@100 reads 100 documents per query
    metric = mo.ui.dropdown(options=fitting_metrics(fusion_prefs(depth=depth.value)),
                            value="ndcg@10", label="metric")
    mo.vstack([mo.hstack([blend, metric], justify="start"),
               mo.hstack([w_text, rrf_k, depth], justify="start"),
               mo.hstack([normalize, missing], justify="start")])
    return (metric,)


@app.cell
def _(baseline_prefs, depth, ws, score_point):
    baseline = score_point(ws, baseline_prefs(depth=depth.value))
    return (baseline,)


@app.cell
def _(
    blend,
    depth,
    fusion_prefs,
    missing,
    normalize,
    rrf_k,
    score_point,
    time,
    w_text,
    ws,
):
    _t0 = time.perf_counter()
    point = score_point(ws, fusion_prefs(blend=blend.value, w_text=w_text.value,
                                         rrf_k=rrf_k.value, normalize=normalize.value,
                                         depth=depth.value, missing=missing.value))
    fuse_ms = (time.perf_counter() - _t0) * 1000
    return fuse_ms, point


@app.cell
def _(baseline, fuse_ms, mo, point):
    _stats = [mo.stat(value=f"{v:.4f}", label=m,
                      caption=f"{v - baseline.metrics[m]:+.4f} vs RRF k=60",
                      direction="increase" if v >= baseline.metrics[m] else "decrease")
              for m, v in point.metrics.items()]
    mo.vstack([mo.hstack(_stats, justify="start"),
               mo.md(f"re-fused and scored in **{fuse_ms:.0f} ms**; run hash "
                     f"`{point.hashes['run'][:16]}`, config hash "
                     f"`{point.hashes['config'][:16]}`")])
    return


@app.cell
def _(
    blend,
    depth,
    fusion_prefs,
    metric,
    missing,
    normalize,
    rrf_k,
    weight_curve,
    ws,
):
    # every setting but w_text: moving the weight slider does not recompute the curve;
    # a coarser grid on large query sets (SciFact: ~0.9 s a point)
    curve = weight_curve(ws, fusion_prefs(blend=blend.value, rrf_k=rrf_k.value,
                                          normalize=normalize.value, depth=depth.value,
                                          missing=missing.value),
                         metric=metric.value, steps=20 if len(ws.queries) <= 100 else 10)
    return (curve,)


@app.cell
def _(blend, curve, metric, plt, point, w_text):
    _fig, _ax = plt.subplots(figsize=(7, 3.2))
    _ax.plot(curve["w_text"], curve["value"], marker="o", ms=3)
    _ax.axvline(w_text.value, color="tab:red", ls="--", lw=1)
    _ax.scatter([w_text.value], [point.metrics.get(metric.value, float("nan"))],
                color="tab:red", zorder=3)
    # not "0 = vectors only": a document missing from one list still scores there (missing),
    # and z-scores or min-max put a list's own documents at or below it
    _ax.set_xlabel("w_text: the text list's weight (w_vec = 1 - w_text)")
    _ax.set_ylabel(metric.value)
    _ax.set_title(f"{metric.value} vs text weight ({blend.value})")
    _ax.grid(alpha=0.3)
    _fig.tight_layout()
    _fig
    return


@app.cell
def _(baseline, metric, mo, moved_queries, point, ws):
    moved = moved_queries(ws, baseline, point, metric=metric.value)
    _changed = moved[(moved["delta"] != 0) | moved["top_changed"]] if len(moved) else moved
    mo.vstack([mo.md(f"### What moved vs RRF k=60: {len(_changed)} of {len(moved)} queries"),
               mo.ui.table(_changed, selection=None, page_size=10)])
    return (moved,)


@app.cell
def _(mo):
    log_button = mo.ui.run_button(label="log this setting to MLflow")
    log_button
    return (log_button,)


@app.cell
def _(log_button, log_fusion_point, mo, notebook_tracking_uri, point, ws):
    # the CLI's store: MLFLOW_TRACKING_URI when set, as --tracking-uri takes it
    _uri = notebook_tracking_uri()
    logged_run = log_fusion_point(ws, point, _uri) if log_button.value else None
    mo.md(f"logged run `{logged_run}` to `{_uri}` (experiment "
          "`aiblox-notebooks`): the policy compare notebook and `mlflow ui` list it"
          if logged_run else "")
    return (logged_run,)


if __name__ == "__main__":
    app.run()
