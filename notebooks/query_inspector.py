# /// script
# requires-python = ">=3.11"
# dependencies = [
#     "aiblox[notebooks]",
#     "marimo>=0.9",
# ]
#
# [tool.uv.sources]
# aiblox = { path = "..", editable = true }
# ///
"""Query inspector: one question through the whole pipeline, every artifact and hash shown."""

import marimo

__generated_with = "0.25.2"
app = marimo.App(width="medium", app_title="aiblox query inspector")


@app.cell
def _():
    import hashlib

    import marimo as mo
    import pandas as pd

    from aiblox.evidence import pack_to_html, pack_to_json, verify_pack
    from aiblox.explore import (
        PACK_RETRIEVED_AT,
        available_datasets,
        available_embedders,
        available_policies,
        inspect_question,
        open_notebook_workspace,
        split_choices,
    )

    return (
        PACK_RETRIEVED_AT,
        available_datasets,
        available_embedders,
        available_policies,
        hashlib,
        inspect_question,
        mo,
        open_notebook_workspace,
        pack_to_html,
        pack_to_json,
        pd,
        split_choices,
        verify_pack,
    )


@app.cell
def _(mo):
    mo.md("""
    # Query inspector

    One question through what `aiblox answer` runs: hybrid retrieval, late chunking, evidence
    selection under a versioned policy, the Prompt Contract V1 prompt (exact bytes), the
    reader, citation validation, the source cards, the determinism hashes, and the
    evidence pack `aiblox answer` stores for the answer.
    """)
    return


@app.cell
def _(available_datasets, available_embedders, available_policies, mo):
    dataset = mo.ui.dropdown(options=available_datasets(), value="sample", label="dataset")
    embedder = mo.ui.dropdown(options=available_embedders(), value="hashing", label="embedder")
    policy = mo.ui.dropdown(options=available_policies(), value="R2_POLICY_V1", label="policy")
    chunker = mo.ui.dropdown(options=["sentences", "token_window", "headings", "whole"],
                             value="sentences", label="chunker")
    top_k_chunks = mo.ui.slider(1, 30, value=12, label="evidence chunks", show_value=True)
    question = mo.ui.text(value="Who developed BM25 and where was it tested?",
                          label="question", full_width=True)
    mo.vstack([mo.hstack([dataset, embedder, policy, chunker, top_k_chunks], justify="start"),
               question])
    return chunker, dataset, embedder, policy, question, top_k_chunks


@app.cell
def _(dataset, mo, split_choices):
    # the dataset's judged splits: test when it has one, else its first
    _splits, _default = split_choices(dataset.value)
    split = mo.ui.dropdown(options=_splits, value=_default, label="split")
    split
    return (split,)


@app.cell
def _(dataset, embedder, mo, open_notebook_workspace, split):
    with mo.status.spinner(title="loading the dataset"):
        ws = open_notebook_workspace(dataset.value, embedder.value, split=split.value,
                                     max_depth=20)
    return (ws,)


@app.cell
def _(chunker, inspect_question, policy, question, top_k_chunks, ws):
    trace = inspect_question(ws, question.value, policy=policy.value, chunker=chunker.value,
                             top_k_chunks=top_k_chunks.value)
    return (trace,)


@app.cell
def _(mo, trace):
    _v = trace.result.validation
    _status = "refusal" if _v.is_refusal else _v.validation_status
    mo.vstack([
        mo.md(f"## Answer ({_status})"),
        mo.callout(mo.plain_text(trace.result.answer_text or str(_v.failure_reason)),
                   kind="success" if _v.validation_status == "PASSED" else "warn"),
        mo.md(f"citations: {', '.join(_v.validated_citations) or 'none'}; "
              f"cited chunks: {', '.join(f'`{c}`' for c in _v.cited_chunk_ids) or 'none'}; "
              f"failure codes: {', '.join(_v.failure_codes) or 'none'}"),
    ])
    return


@app.cell
def _(mo, trace):
    mo.vstack([mo.md(f"## Candidates ({len(trace.candidates)}), with text and vector ranks"),
               mo.ui.table(trace.candidates, selection=None, page_size=10),
               mo.md(f"## Evidence chunks ({len(trace.chunks)})"),
               mo.ui.table(trace.chunks, selection=None, page_size=10)])
    return


@app.cell
def _(mo, trace):
    _drops = {k: v for k, v in trace.result.drop_counts.items() if v}
    mo.vstack([
        mo.md(f"## Selected evidence ({len(trace.selected)}) and drops "
              f"({len(trace.dropped)}: {_drops})"),
        mo.ui.table(trace.selected, selection=None),
        mo.ui.table(trace.dropped, selection=None),
    ])
    return


@app.cell
def _(hashlib, mo, trace):
    prompt_sha256 = hashlib.sha256(trace.prompt_bytes).hexdigest()
    _same = prompt_sha256 == trace.result.prompt.prompt_sha256
    mo.vstack([
        mo.md(f"## Prompt: {len(trace.prompt_bytes)} bytes, "
              f"{trace.result.prompt.total_prompt_tokens} tokens, sha256 `{prompt_sha256}` "
              f"({'matches' if _same else 'DIFFERS from'} the recorded hash)"),
        mo.accordion({"exact prompt bytes": mo.plain_text(trace.prompt_bytes.decode("utf-8"))}),
    ])
    return (prompt_sha256,)


@app.cell
def _(mo, pd, trace):
    hashes = pd.DataFrame(sorted(trace.hashes.items()), columns=["what", "sha256"])
    _cards = pd.DataFrame([s.model_dump(mode="json") if hasattr(s, "model_dump") else dict(s)
                           for s in trace.sources])
    mo.vstack([mo.md("## Determinism hashes"), mo.ui.table(hashes, selection=None),
               mo.md(f"## Source cards ({len(_cards)})"), mo.ui.table(_cards, selection=None)])
    return (hashes,)


@app.cell
def _(PACK_RETRIEVED_AT, mo, pack_to_html, pack_to_json, pd, trace, verify_pack):
    pack = trace.pack
    pack_problems = verify_pack(pack)
    pack_sources = pd.DataFrame(
        [{"n": _i, "name": _s.name, "internal_ref": _s.internal_ref, "uri": _s.uri,
          "confidence": _s.confidence, "content_sha256": _s.content_sha256,
          "excerpt": _s.excerpt} for _i, _s in enumerate(pack.sources, start=1)],
        columns=["n", "name", "internal_ref", "uri", "confidence", "content_sha256",
                 "excerpt"])
    _d = pack.decision
    mo.vstack([
        mo.md(f"## Evidence pack `{pack.pack_id}`\n\n"
              f"decision: **{_d.kind}** ({_d.status}{'; ' + _d.reason if _d.reason else ''}); "
              f"{len(pack.sources)} sources, {len(pack.tool_calls)} tool calls, "
              f"trace `{pack.trace_id}`; retrieved at `{PACK_RETRIEVED_AT}` (fixed, so the id "
              f"is reproducible: `aiblox answer --retrieved-at {PACK_RETRIEVED_AT}`)"),
        mo.callout(mo.md("verify: the id matches the content") if not pack_problems
                   else mo.md("verify: " + "; ".join(pack_problems)),
                   kind="success" if not pack_problems else "danger"),
        mo.ui.table(pack_sources, selection=None),
        mo.accordion({"memo and sources (HTML)": mo.Html(pack_to_html(pack)),
                      "pack JSON (canonical)": mo.plain_text(pack_to_json(pack))}),
    ])
    return pack, pack_problems, pack_sources


if __name__ == "__main__":
    app.run()
