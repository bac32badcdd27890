# /// script
# requires-python = ">=3.11"
# dependencies = [
#     "aiblox[notebooks,tracking]",
#     "marimo>=0.9",
# ]
#
# [tool.uv.sources]
# aiblox = { path = "..", editable = true }
# ///
"""Policy compare: two selection policy versions (or two MLflow runs), query by query."""

import marimo

__generated_with = "0.25.2"
app = marimo.App(width="medium", app_title="aiblox policy compare")


@app.cell
def _():
    import marimo as mo

    from aiblox.explore import (
        answer_all,
        available_datasets,
        available_embedders,
        available_policies,
        compare_mlflow_runs,
        compare_per_query,
        diff_packs,
        evidence_changes_table,
        evidence_pack,
        mlflow_runs,
        notebook_tracking_uri,
        open_notebook_workspace,
        point_run_choices,
        retrieve_bundles,
        score_answers,
        split_choices,
    )

    return (
        answer_all,
        available_datasets,
        available_embedders,
        available_policies,
        compare_mlflow_runs,
        compare_per_query,
        diff_packs,
        evidence_changes_table,
        evidence_pack,
        mlflow_runs,
        mo,
        notebook_tracking_uri,
        open_notebook_workspace,
        point_run_choices,
        retrieve_bundles,
        score_answers,
        split_choices,
    )


@app.cell
def _(mo):
    mo.md("""
    # Policy compare

    The query sample is retrieved **once** (late-chunked hybrid retrieval) and answered under
    each selection policy with the offline `extractive` reader, and scored with the answer
    metrics a selection sweep records. Deltas are B - A, with the p-value of the paired test
    `aiblox compare` runs (two-sided paired t-test) and win / tie / loss counts of B against A
    under each metric's direction (`better`: for a cost such as `selected_tokens`, a decrease is
    a win), as `aiblox compare` and the sweep report count them. Runs can be named as
    `aiblox compare` names them: a run id, `SWEEP:LABEL` or a config-hash prefix
    (`aiblox.sweep.runs.resolve_run`).
    """)
    return


@app.cell
def _(available_datasets, available_embedders, available_policies, mo):
    _policies = available_policies()
    dataset = mo.ui.dropdown(options=available_datasets(), value="sample", label="dataset")
    embedder = mo.ui.dropdown(options=available_embedders(), value="hashing", label="embedder")
    policy_a = mo.ui.dropdown(options=_policies, value=_policies[0], label="policy A")
    policy_b = mo.ui.dropdown(options=_policies, value=_policies[-1], label="policy B")
    limit = mo.ui.slider(4, 200, step=4, value=12, label="queries", show_value=True)
    chunker = mo.ui.dropdown(options=["sentences", "token_window", "headings", "whole"],
                             value="sentences", label="chunker")
    mo.vstack([mo.hstack([dataset, embedder, chunker, limit], justify="start"),
               mo.hstack([policy_a, policy_b], justify="start")])
    return chunker, dataset, embedder, limit, policy_a, policy_b


@app.cell
def _(dataset, mo, split_choices):
    # the dataset's judged splits: test when it has one, else its first
    _splits, _default = split_choices(dataset.value)
    split = mo.ui.dropdown(options=_splits, value=_default, label="split")
    split
    return (split,)


@app.cell
def _(chunker, dataset, embedder, limit, mo, open_notebook_workspace, retrieve_bundles, split):
    with mo.status.spinner(title="retrieving the query sample"):
        ws = open_notebook_workspace(dataset.value, embedder.value, split=split.value,
                                     max_depth=20)
        bundles = retrieve_bundles(ws, limit=limit.value, chunker=chunker.value)
    return bundles, ws


@app.cell
def _(answer_all, bundles, policy_a, policy_b, score_answers, ws):
    results_a = answer_all(ws, bundles, policy_a.value)
    results_b = answer_all(ws, bundles, policy_b.value)
    per_query_a = score_answers(ws, bundles, results_a)
    per_query_b = score_answers(ws, bundles, results_b)
    return per_query_a, per_query_b, results_a, results_b


@app.cell
def _(compare_per_query, mo, per_query_a, per_query_b, policy_a, policy_b):
    deltas = compare_per_query(per_query_a, per_query_b)
    mo.vstack([mo.md(f"### {policy_b.value} (B) vs {policy_a.value} (A)"),
               mo.ui.table(deltas, selection=None)])
    return (deltas,)


@app.cell
def _(evidence_changes_table, mo, results_a, results_b, ws):
    changes = evidence_changes_table(ws, results_a, results_b)
    mo.vstack([mo.md(f"### Evidence that changed: {len(changes)} of {len(results_a)} queries"),
               mo.ui.table(changes, selection=None, page_size=8)])
    return (changes,)


@app.cell
def _(bundles, changes, mo, ws):
    _text = ws.query_text
    _labels = {f"{_q}: {_text[_q][:70]}": _q for _q in sorted(bundles)}
    _first = changes["qid"].iloc[0] if len(changes) else next(iter(sorted(bundles)), None)
    pack_query = mo.ui.dropdown(options=_labels, label="query",
                                value=next((_k for _k, _v in _labels.items() if _v == _first),
                                           None))
    mo.vstack([mo.md("""
    ## Evidence packs of one query

    The evidence pack `aiblox answer` would store for the query under each policy (same
    retrieval, fixed retrieval time: `aiblox answer "QUESTION" --dataset DATASET --embedder
    EMBEDDER --policy POLICY --retrieved-at 2000-01-01T00:00:00Z` stores the same pack id),
    and what differs from A's pack to B's: the decision, the sources added or removed, the
    prompt and policy hashes. The first query whose evidence changed is chosen by default.
    """), pack_query])
    return (pack_query,)


@app.cell
def _(bundles, diff_packs, evidence_pack, mo, pack_query, policy_a, policy_b, results_a,
      results_b, ws):
    _q = pack_query.value
    if _q is None:
        pack_a, pack_b, pack_diff = None, None, None
        _out = mo.md("no query to compare")
    else:
        _text = ws.query_text[_q]
        pack_a = evidence_pack(ws, _text, bundles[_q], results_a[_q])
        pack_b = evidence_pack(ws, _text, bundles[_q], results_b[_q])
        pack_diff = diff_packs(pack_a, pack_b)
        _out = mo.vstack([
            mo.md(f"A ({policy_a.value}): `{pack_a.pack_id}`, {pack_a.decision.kind}, "
                  f"{len(pack_a.sources)} sources; B ({policy_b.value}): `{pack_b.pack_id}`, "
                  f"{pack_b.decision.kind}, {len(pack_b.sources)} sources; "
                  f"{len(pack_diff)} differences"),
            mo.ui.table(pack_diff, selection=None, page_size=12) if len(pack_diff)
            else mo.md("the two packs are identical"),
        ])
    _out
    return pack_a, pack_b, pack_diff


@app.cell
def _(mo):
    mo.md("""
    ## MLflow runs

    Runs logged by `aiblox sweep` to the same store the CLI uses (`MLFLOW_TRACKING_URI` when
    set, as the CLI's `--tracking-uri` takes it; another store: type its URI).
    """)
    return


@app.cell
def _(mo, notebook_tracking_uri):
    tracking = mo.ui.text(value=notebook_tracking_uri(), label="MLflow tracking URI",
                          full_width=True)
    tracking
    return (tracking,)


@app.cell
def _(mlflow_runs, mo, point_run_choices, tracking):
    tracking_uri = tracking.value.strip()
    runs = mlflow_runs(tracking_uri)
    # the points only: a sweep's parent run is no point to compare (aiblox compare refuses it)
    run_choices = point_run_choices(runs)
    _names = list(run_choices)
    run_a = mo.ui.dropdown(options=run_choices, value=_names[0] if _names else None,
                           label="run A")
    run_b = mo.ui.dropdown(options=run_choices, value=_names[1] if len(_names) > 1 else None,
                           label="run B")
    # any run of the store, however old (the lists hold the newest runs only): typed as
    # `aiblox compare` takes it, it replaces the list's choice
    ref_a = mo.ui.text(value="", label="or run A by reference")
    ref_b = mo.ui.text(value="", label="or run B by reference")
    _older = (f"The lists hold the newest {len(runs)} runs of the store; an older run: type "
              "its run id, `SWEEP:LABEL` or config-hash prefix." if runs.attrs.get("truncated")
              else "A run can also be typed as its run id, `SWEEP:LABEL` or config-hash prefix.")
    if runs.empty:
        _out = mo.md(f"No runs in `{tracking_uri}` yet: "
                     "`aiblox sweep evals/sweeps/sample_fusion.toml` logs some.")
    elif len(run_choices) < 2:
        _out = mo.md(f"{len(run_choices)} point run{'' if len(run_choices) == 1 else 's'} in "
                     f"`{tracking_uri}` (a sweep's own run is no point): two are needed "
                     "to compare; a sweep with more points, `aiblox eval ... --mlflow` or the "
                     "fusion explorer's log button adds some.")
    else:
        _out = mo.vstack([mo.hstack([run_a, run_b], justify="start"),
                          mo.hstack([ref_a, ref_b], justify="start"), mo.md(_older)])
    _out
    return ref_a, ref_b, run_a, run_b, run_choices, runs, tracking_uri


@app.cell
def _(compare_mlflow_runs, mo, ref_a, ref_b, run_a, run_b, run_choices, tracking_uri):
    picked_a = ref_a.value.strip() or run_a.value
    picked_b = ref_b.value.strip() or run_b.value
    if len(run_choices) < 2 or picked_a is None or picked_b is None:
        run_metrics, run_per_query = None, None
        _out = mo.md("")
    else:
        try:
            run_metrics, run_per_query = compare_mlflow_runs(picked_a, picked_b,
                                                             tracking_uri)
        except ValueError as _exc:  # not paired (other datasets), or no such run
            run_metrics, run_per_query = None, None
            _out = mo.md(f"`{_exc}`")
        else:
            _out = mo.vstack([mo.ui.table(run_metrics, selection=None),
                              mo.ui.table(run_per_query, selection=None)
                              if len(run_per_query) else mo.md("no per-query artifacts")])
    _out
    return picked_a, picked_b, run_metrics, run_per_query


if __name__ == "__main__":
    app.run()
