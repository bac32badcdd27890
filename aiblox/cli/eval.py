"""``aiblox eval``: score retrieval systems on a labelled dataset with ranx, as one experiment
table (:mod:`aiblox.experiment.table`): retrieval modes and external TREC run files, tested
against a baseline, printed as a table, markdown, LaTeX, CSV or JSON on stdout."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from aiblox.cli._common import (
    DEVICE_HELP,
    checked_alpha,
    checked_choice,
    checked_chunk_sizes,
    checked_chunker,
    checked_device,
    checked_metrics,
    checked_prefs,
    console,
    fail,
    field_choices,
    file_identity,
    out,
    outputs_spare_inputs,
    print_json,
    show_progress,
    undone_on_failure,
    writable_folder,
)
from aiblox.cli._defaults import EVAL_EXPERIMENT, METRICS, TRACKING_URI
from aiblox.cli._errors import print_error

if TYPE_CHECKING:  # the engine, ranx and the stores are imported when the command runs
    from aiblox.contracts.retrieval import RetrievalPrefs
    from aiblox.engine import Pipeline
    from aiblox.engine.chunk_eval import ChunkEvalResult
    from aiblox.engine.evaluate import EvalResult
    from aiblox.experiment.table import Experiment

CHUNK_DEFAULTS: dict[str, Any] = {
    "--chunks": False, "--chunker": "", "--max-chunk-tokens": None, "--overlap-tokens": None,
    "--chunk-strategy": "late", "--top-k-chunks": 12, "--chunk-items": 10,
    "--per-item-chunk-cap": 3, "--chunk-limit": None}
"""The chunk options' defaults: any other value asks for chunk-level metrics."""


def eval_command(
    dataset: str = typer.Argument(..., help=(
        "Dataset name (sample, scifact, ...), a BEIR or CSV/TSV/parquet folder, or a "
        "dataset.toml.")),
    split: str = typer.Option("test", help="qrels split to score."),
    mode: list[str] = typer.Option([], "--mode", help=(
        "bm25, dense or hybrid; repeat for several (default: hybrid, none with --run or "
        "--pipeline).")),
    pipeline: list[str] = typer.Option([], "--pipeline", help=(
        "A retrieval pipeline scored as a system: an expression such as 'bm25 >> rm3 >> "
        "bm25' or '(bm25 + dense) % 100 >> dense_rescore' (>> then, + rank fusion: RRF k 60 "
        "by default, not a sum of scores; weights as fuse(bm25, dense, blend='linear', "
        "weights=[0.3, 0.7]); % cut-off; stages: aiblox.engine), optionally labelled "
        "'LABEL=EXPR'; its retrieval stages take "
        "the options' settings (--depth, --blend ...) as defaults. Repeatable.")),
    db: str = typer.Option("", "--db", help="Store to use, synced to the dataset first (only what "
                                            "is missing is done); default: the dataset's own "
                                            "store under .aiblox/datasets."),
    embedder: str = typer.Option("minilm", "--embedder", help=(
        "Embedder: minilm, hashing, or a sentence-transformers model folder or package.")),
    device: str = typer.Option("auto", "--device", help=DEVICE_HELP),
    vectors: list[Path] = typer.Option([], "--vectors", help="Precomputed vectors parquet."),
    blend: str = typer.Option("rrf", help="Fusion: rrf or linear."),
    rrf_k: int = typer.Option(60, "--rrf-k", help="RRF constant k."),
    w_text: float = typer.Option(0.35, "--w-text", help="Linear blend weight of BM25."),
    w_vec: float = typer.Option(0.65, "--w-vec", help="Linear blend weight of the vector score."),
    normalize: str = typer.Option("sigmoid", help="minmax, zscore, sigmoid or none."),
    missing: str = typer.Option("zero", help="Linear blend score of a document absent from a "
                                             "list: zero or list_min."),
    depth: int | None = typer.Option(None, help=(
        "Candidates taken from each signal before fusion (default: the evaluation depth, 100 "
        "or the deepest --metric cutoff; 1,000 with a metric without one, such as map).")),
    top_k: int | None = typer.Option(None, "--top-k", help=(
        "Fused candidates scored per query (default: the evaluation depth, as --depth). A "
        "--top-k or --depth below a --metric cutoff is refused.")),
    metric: list[str] = typer.Option(list(METRICS), "--metric",
                                     help="ranx metric name; repeatable."),
    ignore_identical_ids: bool = typer.Option(
        False, "--ignore-identical-ids",
        help="Drop a retrieved document whose id equals the query id (BEIR/MTEB protocol), in "
             "every stage of a pipeline that searches, and from each --run file's lists before "
             "they are scored and hashed (as BEIR's evaluation drops it)."),
    chunks: bool = typer.Option(CHUNK_DEFAULTS["--chunks"], "--chunks",
                                help="Also report chunk-level metrics (implied by --chunker "
                                     "and every other chunk option)."),
    chunker: str = typer.Option(CHUNK_DEFAULTS["--chunker"], "--chunker",
                                help="Chunker for chunk-level metrics (token_window, "
                                     "sentences, headings, whole)."),
    max_chunk_tokens: int | None = typer.Option(CHUNK_DEFAULTS["--max-chunk-tokens"],
                                                "--max-chunk-tokens",
                                                help="Token budget per chunk."),
    overlap_tokens: int | None = typer.Option(CHUNK_DEFAULTS["--overlap-tokens"],
                                              "--overlap-tokens",
                                              help="Tokens shared by consecutive chunks."),
    chunk_strategy: str = typer.Option(CHUNK_DEFAULTS["--chunk-strategy"],
                                       "--chunk-strategy",
                                       help="late, precomputed or mixed."),
    top_k_chunks: int = typer.Option(CHUNK_DEFAULTS["--top-k-chunks"], "--top-k-chunks",
                                    help="Evidence chunks returned."),
    chunk_items: int = typer.Option(CHUNK_DEFAULTS["--chunk-items"], "--chunk-items",
                                    help="Top fused candidates chunked per query."),
    per_item_chunk_cap: int = typer.Option(CHUNK_DEFAULTS["--per-item-chunk-cap"],
                                           "--per-item-chunk-cap",
                                           help="Evidence chunks kept per document."),
    chunk_limit: int | None = typer.Option(CHUNK_DEFAULTS["--chunk-limit"], "--chunk-limit",
                                           help="Chunk metrics on the first N query ids "
                                                "only, ids sorted as text (1, 10, 11, ...)."),
    run_files: list[Path] = typer.Option([], "--run", help=(
        "External TREC run file (qid Q0 docid rank score tag) scored beside the modes, read "
        "as trec_eval reads it (ties by document id descending; warnings say where a rule "
        "applied); repeatable. Its label is the file stem (two files of one stem: with the "
        "folders that tell them apart, a/bm25 and b/bm25; the file name when a mode or "
        "pipeline has the stem). "
        "Given alone, without --mode, only the run files are scored.")),
    baseline: str = typer.Option("", "--baseline", help=(
        "System label (a mode or a run file's label) every other system is tested against: "
        "each value then shows its delta to the baseline (▲/▼ when significant) and its "
        "adjusted p.")),
    pairwise: bool = typer.Option(False, "--pairwise", help=(
        "Test every pair of systems, as ranx's compare does (instead of --baseline): a value "
        "shows ▲x/▼x for each system x it is significantly above or below, and a second "
        "table lists every pair's delta and adjusted p.")),
    test: str = typer.Option("t", "--test", help="Paired test on per-query values: t, wilcoxon "
                                                  "or fisher."),
    correction: str = typer.Option("holm", "--correction", help=(
        "Multiple-comparison correction within each metric: holm, bonferroni or none.")),
    alpha: float = typer.Option(0.05, "--alpha", help="Significance level (adjusted p <= it)."),
    per_query: Path | None = typer.Option(None, "--per-query", help=(
        "Write per-query values (system, query_id, metric, value) to this .parquet or .csv; "
        "with chunk metrics, theirs too (answer_recall@k, max_passage:<metric>).")),
    save_runs: Path | None = typer.Option(None, "--save-runs", help=(
        "Write each system's TREC run file to this folder (<label>.trec; tied scores written "
        "strictly decreasing, so trec_eval scores the same ranking).")),
    fmt: str = typer.Option("table", "--format", help=(
        "Output on stdout: table, markdown, latex, csv or json.")),
    mlflow: bool = typer.Option(False, "--mlflow", help=(
        "Log each system as an MLflow run (a mode or a --pipeline with its sweep manifest, so "
        "`aiblox eval verify RUN_ID` re-checks it).")),
    tracking_uri: str = typer.Option(TRACKING_URI, "--tracking-uri", envvar="MLFLOW_TRACKING_URI",
                                     help="MLflow tracking URI for --mlflow."),
    experiment_name: str = typer.Option(EVAL_EXPERIMENT, "--experiment",
                                        help="MLflow experiment for --mlflow."),
    as_json: bool = typer.Option(False, "--json", help="Same as --format json."),
) -> None:
    """Score retrieval systems on DATASET's SPLIT with ranx, as one experiment table: modes
    (--mode) and external TREC runs (--run), tested against --baseline."""
    from aiblox.contracts.retrieval import MAX_DEPTH, RetrievalPrefs
    from aiblox.experiment.table import (
        CORRECTIONS,
        TESTS,
        RunFileError,
        compare_systems,
        read_trec_run,
    )
    from aiblox.stores import mask_password

    metric = checked_metrics(metric)
    device = checked_device(device)
    fmt = "json" if as_json else fmt
    modes = list(mode) or ([] if run_files or pipeline else ["hybrid"])
    pipes = _pipelines(pipeline)
    unfused = [label for label, p in pipes.items()
               if not any(s.kind in ("fuse", "retrieve") for s in p.stages())]
    # QA 25: a setting silently unread (a value out of range is refused below, alone)
    if top_k is not None and 1 <= top_k <= MAX_DEPTH and unfused:
        print_error(f"--top-k {top_k}: only a fusion reads it, and "
                    f"{', '.join(repr(u) for u in unfused)} fuse{'s' * (len(unfused) == 1)} "
                    f"nothing: {'its run is' if len(unfused) == 1 else 'their runs are'} as "
                    f"without it (the depth of a stage is --depth, or % N)", prefix="warning")
    checked_choice(fmt, FORMATS, "--format")
    checked_choice(test, TESTS, "--test")
    checked_choice(correction, CORRECTIONS, "--correction")
    for m in modes:
        checked_choice(m, field_choices(RetrievalPrefs, "mode"), "--mode")
    checked_alpha(alpha)
    if per_query is not None and per_query.suffix.lower() not in (".parquet", ".pq", ".csv"):
        fail(f"--per-query {per_query}: the suffix picks the format: .parquet or .csv")
    mode_prefs = {m: _mode_prefs(m, metric, depth=depth, top_k=top_k, blend=blend,
                                 rrf_k=rrf_k, w_text=w_text, w_vec=w_vec, normalize=normalize,
                                 missing=missing, ignore_identical_ids=ignore_identical_ids)
                  for m in modes}
    # any chunk option asks for chunk-level metrics (it sets nothing else): never silently unused
    given = (chunks, chunker, max_chunk_tokens, overlap_tokens, chunk_strategy, top_k_chunks,
             chunk_items, per_item_chunk_cap, chunk_limit)  # CHUNK_DEFAULTS' order
    chunk_set = [name for (name, default), value in zip(CHUNK_DEFAULTS.items(), given,
                                                         strict=True) if value != default]
    with_chunks = bool(chunk_set)
    chunk_prefs: dict[str, RetrievalPrefs] = {}
    chunk_metrics: list[str] = []
    chunk_ks: list[int] = []
    if with_chunks and pipes:
        fail(f"{', '.join(chunk_set)} score{'s' if len(chunk_set) == 1 else ''} modes' "
             f"evidence (chunk-level metrics); a --pipeline is scored on its ranking only: "
             f"leave {'it' if len(chunk_set) == 1 else 'them'} out, or score the pipeline's "
             f"first stage as a --mode")
    # the chunk options' values are checked whether or not chunks are scored: a bad value
    # is one error line, never silently unused
    if chunk_limit is not None and chunk_limit < 1:
        fail(f"--chunk-limit {chunk_limit}: out of range; valid: a whole number >= 1")
    if chunker:
        checked_chunker(chunker, {"--max-chunk-tokens": max_chunk_tokens,
                                  "--overlap-tokens": overlap_tokens})
    chunk_options = {
        "top_k_items": ("--chunk-items", chunk_items),
        "top_k_chunks": ("--top-k-chunks", top_k_chunks),
        "per_item_chunk_cap": ("--per-item-chunk-cap", per_item_chunk_cap),
        "chunking.strategy": ("--chunk-strategy", chunk_strategy),
        "chunking.max_chunk_tokens": ("--max-chunk-tokens", max_chunk_tokens),
        "chunking.overlap_tokens": ("--overlap-tokens", overlap_tokens)}
    chunk_fields = {"top_k_items": chunk_items, "top_k_chunks": top_k_chunks,
                    "per_item_chunk_cap": per_item_chunk_cap,
                    "chunking": {"strategy": chunk_strategy,
                                 "chunker_id": chunker or "sentences",
                                 "max_chunk_tokens": max_chunk_tokens,
                                 "overlap_tokens": overlap_tokens}}
    chunking = checked_prefs({"query_text": "", **chunk_fields}, chunk_options).chunking
    sized = (max_chunk_tokens, overlap_tokens) != (None, None)
    if with_chunks or sized:  # sizes the chunker refuses: before any work
        checked_chunk_sizes(chunking)
    if with_chunks and modes:
        for m, prefs in mode_prefs.items():
            chunk_prefs[m] = checked_prefs({**prefs.model_dump(), **chunk_fields},
                                           chunk_options)
        chunk_metrics, chunk_ks = _chunk_depths(metric, chunk_items, top_k_chunks)
    seen_files: dict[Any, Path] = {}
    for f in run_files:  # one file twice (a link, a hard link) would be one system, relabelled
        same = seen_files.setdefault(file_identity(f) or f.resolve(), f)
        if same is not f:
            fail(f"--run {f}: given twice (as {same}); give each run file once")
    runs = {}
    for f in run_files:  # read before any work: a bad line is one error, at once
        try:
            runs[f] = read_trec_run(f)
        except RunFileError as exc:
            fail(str(exc))
    labels = _labels(modes, run_files, list(pipes))
    if baseline and baseline not in labels.values():
        fail(f"--baseline {baseline!r} is not a system; choose one of "
             f"{', '.join(labels.values())}")
    if baseline and pairwise:
        fail(f"--baseline {baseline} and --pairwise: test against one baseline, or every pair "
             f"of systems; give one of them")
    made: list[list[Path]] = []  # the output folders made here: removed if it fails
    with undone_on_failure(made, tracking_uri if mlflow else None):
        if save_runs is not None:
            _distinct_files(list(labels.values()))
            made.append(writable_folder(save_runs, "--save-runs"))
        if per_query is not None:
            made.append(writable_folder(per_query.parent if str(per_query.parent) else Path("."),
                                        "--per-query"))
        if mlflow:
            try:
                from aiblox.engine.tracking import tracking_client

                tracking_client(tracking_uri, create=True)
            except (ValueError, ImportError) as exc:
                fail(f"--mlflow: {exc}")
        from aiblox.data import DatasetError, load_dataset
        from aiblox.data.trec import run_file_stem
        from aiblox.engine import PipelineError
        from aiblox.engine.chunk_eval import evaluate_chunks
        from aiblox.engine.evaluate import check_evaluation, evaluate_retrieval
        from aiblox.engine.settings import needs_vectors
        from aiblox.engine.workspace import open_workspace
        from aiblox.experiment.table import (
            system_from_result,
            system_from_run,
            write_trec_run,
        )
        from aiblox.metrics import DepthError
        from aiblox.retrieval import make_retriever
        from aiblox.stores import StoreError

        try:
            ds = load_dataset(dataset, splits=[split])
        except DatasetError as exc:
            fail(str(exc))
        saved = {save_runs / f"{run_file_stem(n)}.trec": "--save-runs" for n in labels.values()
                 } if save_runs is not None else {}
        outputs_spare_inputs(
            {**saved, **({per_query: "--per-query"} if per_query is not None else {})},
            {**{f: "a --run file" for f in run_files},
             **({Path(db): "the --db store"} if db else {})},
            {ds.path: "the dataset"} if ds.source is not None and ds.path.is_dir() else {})
        results: list[EvalResult] = []
        chunk_results: list[ChunkEvalResult | None] = []
        if modes or pipes:
            base = _mode_prefs("hybrid", metric, depth=depth, top_k=top_k, blend=blend,
                               rrf_k=rrf_k, w_text=w_text, w_vec=w_vec, normalize=normalize,
                               missing=missing, ignore_identical_ids=ignore_identical_ids)
            try:
                ws = open_workspace(ds, db or None, embedder, device=device, vectors=vectors,
                                    # bm25 alone embeds nothing (needs_vectors of no pipeline is
                                    # the base's mode, hybrid)
                                    with_vectors=any(m != "bm25" for m in modes) or bool(
                                        pipes and needs_vectors(base, list(pipes.values()))),
                                    progress=show_progress())
            except (StoreError, ValueError, ImportError) as exc:
                fail(str(exc))
                raise  # unreachable
            if ws.synced is not None and not ws.synced.up_to_date:  # as `aiblox ingest` says it
                console.print(f"synced {ds.name} into {mask_password(ws.db)}: "
                              f"{ws.synced.changes()}", markup=False, highlight=False,
                              soft_wrap=True)
            for label, p in pipes.items():  # every pipeline checked against the store first
                try:
                    check_evaluation(ws, ds, p, base, metric)
                except (PipelineError, DepthError) as exc:
                    ws.close()
                    fail(f"--pipeline {label}: {exc}")
            try:
                for m in modes:
                    results.append(evaluate_retrieval(ws.retriever, ds, split, mode_prefs[m],
                                                      metric, progress=show_progress()))
                    chunk_results.append(None)
                    if with_chunks:
                        late = make_retriever(ws.store, ws.embedder if m != "bm25" else None)
                        chunk_results[-1] = c = evaluate_chunks(late, ds, split, chunk_prefs[m],
                                                                chunk_metrics, k_values=chunk_ks,
                                                                limit=chunk_limit,
                                                                progress=show_progress())
                        _warn_missing(m, c)
                for label, p in pipes.items():
                    try:
                        results.append(evaluate_retrieval(ws, ds, split, base, metric, pipeline=p,
                                                          progress=show_progress()))
                    except (PipelineError, DepthError) as exc:
                        fail(f"--pipeline {label}: {exc}")
                    chunk_results.append(None)
            finally:
                ws.close()
        kinds = [*(("mode", m) for m in modes), *(("pipeline", p) for p in pipes)]
        systems = [system_from_result(r, name, kind)  # type: ignore[arg-type]
                   for r, (kind, name) in zip(results, kinds, strict=True)]
        for f, run in runs.items():
            try:
                systems.append(system_from_run(ds, split, run, labels[f], metric, source=f,
                                               ignore_identical_ids=ignore_identical_ids))
            except RunFileError as exc:
                fail(str(exc))
            chunk_results.append(None)
        exp = compare_systems(systems, ds.name, split, metric, baseline=baseline or None,
                              test=test, correction=correction,  # type: ignore[arg-type]
                              alpha=alpha, pairwise=pairwise)
        if save_runs is not None:
            for s in systems:
                write_trec_run(s, save_runs)
        if per_query is not None:  # with --chunks, each mode's chunk-level values too
            exp.write_per_query(per_query, {s.name: c.per_query for s, c in
                                            zip(exp.systems, chunk_results, strict=True) if c})
        if mlflow:
            from aiblox.embedding.device import embedder_device
            from aiblox.experiment.tracking import log_experiment, result_manifest

            manifests = {name: result_manifest(ds, r, embedder=embedder, metrics=metric,
                                               device=embedder_device(ws.embedder))
                         for r, (_, name) in zip(results, kinds, strict=True)}
            ids = log_experiment(exp, manifests, tracking_uri, experiment_name)
            for name, rid in ids.items():
                console.print(f"mlflow: {name} logged as run {rid}"
                              + (f" (aiblox eval verify {rid} --tracking-uri {tracking_uri})"
                                 if name in manifests else ""), soft_wrap=True, markup=False)
        _print(exp, fmt, chunk_results)


FORMATS = ("table", "markdown", "latex", "csv", "json")
DEPTH_OPTIONS = {"top_k_items": "--top-k", "fts.top_k": "--depth", "vector.top_k": "--depth"}
"""The options that set an evaluation's depths, by ``RetrievalPrefs`` field."""


def _mode_prefs(mode: str, metrics: list[str], *, depth: int | None, top_k: int | None,
                blend: str, rrf_k: int, w_text: float, w_vec: float, normalize: str,
                missing: str, ignore_identical_ids: bool) -> RetrievalPrefs:
    """The retrieval preferences of ``mode`` from the options, checked before any work: a value
    the contract refuses, or a --top-k / --depth below a metric's cutoff, is one ``error:``
    line naming the option. A depth left out is the evaluation depth
    (:func:`~aiblox.metrics.evaluation_prefs`)."""
    from aiblox.metrics import DepthError, check_depth, evaluation_prefs

    data: dict[str, Any] = {
        "query_text": "", "mode": mode, "ignore_identical_ids": ignore_identical_ids,
        "scoring": {"blend": blend, "rrf_k": rrf_k, "w_text": w_text, "w_vec": w_vec,
                    "normalize": normalize, "missing": missing}}
    if top_k is not None:
        data["top_k_items"] = top_k
    if depth is not None:
        data["fts"], data["vector"] = {"top_k": depth}, {"top_k": depth}
    prefs = checked_prefs(data, {
        "top_k_items": ("--top-k", top_k), "fts.top_k": ("--depth", depth),
        "vector.top_k": ("--depth", depth), "scoring.blend": ("--blend", blend),
        "scoring.rrf_k": ("--rrf-k", rrf_k), "scoring.w_text": ("--w-text", w_text),
        "scoring.w_vec": ("--w-vec", w_vec), "scoring.normalize": ("--normalize", normalize),
        "scoring.missing": ("--missing", missing)})
    prefs = evaluation_prefs(prefs, metrics)
    try:
        check_depth(prefs, metrics, DEPTH_OPTIONS, fix=(
            "give {names} {cut} or more, or leave it out (the evaluation then retrieves as "
            "deep as its deepest cutoff), or use cutoffs of at most {depth}"))
    except DepthError as exc:
        fail(str(exc))
    return prefs


def _chunk_depths(metrics: list[str], chunk_items: int, top_k_chunks: int
                  ) -> tuple[list[str], list[int]]:
    """The metrics and ``answer_recall@k`` cutoffs chunk evaluation can compute: the
    max-passage projection ranks only the ``--chunk-items`` chunked documents, and
    ``--top-k-chunks`` chunks are returned; deeper ones are left out with one warning line."""
    from aiblox.metrics import metric_cutoff
    from aiblox.metrics.depth import deepest_cutoff

    fit = [m for m in metrics if (metric_cutoff(m) or 0) <= chunk_items]
    ks = [k for k in (1, 5, 10) if k <= top_k_chunks]
    left = [m for m in metrics if m not in fit]
    if left:
        print_error(f"--chunks: {', '.join(left)} left out of the chunk-level (max-passage) "
                    f"metrics: they rank only the --chunk-items {chunk_items} chunked "
                    f"documents (raise --chunk-items to {deepest_cutoff(left)} to score them)",
                    prefix="warning")
    if not ks:
        fail(f"--top-k-chunks {top_k_chunks}: chunk evaluation needs at least 1 chunk returned")
    if len(ks) < 3:
        print_error(f"--chunks: answer_recall@k only for k <= --top-k-chunks {top_k_chunks}: "
                    f"{', '.join(f'@{k}' for k in ks) or 'none'}", prefix="warning")
    return fit, ks


def _chunk_counts(c: ChunkEvalResult) -> str:
    """The chunk line's counts: where the chunks came from. ``precomputed`` reads no cache
    entry made at query time, so its hits and missing documents are shown (``cache hits 0
    misses 0`` alone hid documents that gave no evidence); ``mixed`` shows both."""
    counts, strategy = c.counts, c.config["prefs"]["chunking"]["strategy"]
    pre = (f"precomputed hits {counts.get('precomputed_hits', 0)} missing "
           f"{counts.get('precomputed_missing', 0)}")
    cache = (f"cache hits {counts.get('chunk_cache_hits', 0)} misses "
             f"{counts.get('chunk_cache_misses', 0)}")
    return {"precomputed": pre, "mixed": f"{pre}  {cache}"}.get(strategy, cache)


def _warn_missing(mode: str, c: ChunkEvalResult) -> None:
    """One warning line when candidate documents had no precomputed chunks: they gave no
    evidence, and answer recall dropped with nothing saying why."""
    if not c.missing_documents:
        return
    n, shown = len(c.missing_documents), ", ".join(c.missing_documents[:5])
    print_error(f"--mode {mode} --chunk-strategy precomputed: {n} candidate document"
                f"{'s' if n != 1 else ''} ({shown}{', ...' if n > 5 else ''}) had no "
                f"precomputed chunks for {c.chunker_id} (changed since they were precomputed, "
                f"or never precomputed) and gave no evidence: `aiblox index build --chunks` "
                f"with this --embedder, --chunker and sizes precomputes them again (or use "
                f"--chunk-strategy mixed)", prefix="warning")


def _pipelines(texts: list[str]) -> dict[str, Pipeline]:
    """Every ``--pipeline`` parsed and checked before any work, by label (``LABEL=EXPR``, else
    the expression itself): one ``error:`` line naming the option and the stage otherwise."""
    from aiblox.engine import PipelineError, parse_pipeline
    from aiblox.engine.evaluate import check_outside_sweep
    from aiblox.engine.expression import split_label

    out: dict[str, Pipeline] = {}
    for text in texts:
        named, expr = split_label(text)  # no label: the expression, on one line
        label = named if named is not None else " ".join(text.split())
        if label in out:  # one label twice: a later system would replace the earlier
            fail(f"two systems are labelled {label!r} (--pipeline labels must differ: label "
                 f"them LABEL=EXPR)")
        try:
            out[label] = parse_pipeline(expr, where="--pipeline").check()
            check_outside_sweep(out[label])
        except PipelineError as exc:  # named as a later refusal names it: by its label
            shown = label if len(label) <= 80 else f"{label[:60]}... ({len(label):,} characters)"
            fail(f"--pipeline {shown}: {str(exc).removeprefix('--pipeline: ')}")
    return out


def _labels(modes: list[str], run_files: list[Path],
            pipelines: list[str] | None = None) -> dict[Any, str]:
    """Every system's label, modes first, then pipelines (``{mode: label}``,
    ``{expression label: label}`` and ``{path: label}``): a run file's stem; files of one stem
    in different folders by as many trailing folders as tell them apart (``a/bm25``,
    ``b/bm25``); a file whose label a mode or pipeline has, by its file name. Two systems with
    one label fail."""
    labels: dict[Any, str] = {}
    taken: set[str] = set()
    files = _file_labels(run_files)
    for key, label in [*((m, m) for m in modes), *((p, p) for p in pipelines or []),
                       *((f, files[f]) for f in run_files)]:
        if label in taken and isinstance(key, Path):
            label = key.name if label == key.stem else f"{label}{key.suffix}"
        if label in taken:
            fail(f"two systems are labelled {label!r} (--mode, --pipeline and --run labels "
                 f"must differ: rename a run file, or label a pipeline LABEL=EXPR)")
        taken.add(label)
        labels[key] = label
    return labels


def _distinct_files(labels: list[str]) -> None:
    """One ``error:`` line, before any work, when two systems' run files would have one name
    in ``--save-runs`` (the later would replace the earlier)."""
    from aiblox.data.trec import run_file_stem

    seen: dict[str, str] = {}
    for label in labels:
        stem = run_file_stem(label)
        if stem in seen:
            fail(f"--save-runs: {seen[stem]!r} and {label!r} would both be written to "
                 f"{stem}.trec: label them apart (LABEL=EXPR)")
        seen[stem] = label


def _file_labels(run_files: list[Path]) -> dict[Path, str]:
    """Each run file's label: its stem, with the fewest trailing folders that tell it from
    the other files of its stem (``runs/a/bm25.trec``, ``runs/b/bm25.trec``: ``a/bm25``,
    ``b/bm25``); files of one stem in one folder (``bm25.trec``, ``bm25.txt``): their paths."""
    folders = {f: f.resolve().parent.parts for f in run_files}

    def tail(f: Path, n: int) -> str:
        return "/".join((*folders[f][len(folders[f]) - n:], f.stem))

    out: dict[Path, str] = {}
    for f in run_files:
        same = [g for g in run_files if g.stem == f.stem and g != f]
        n = next((n for n in range(len(folders[f]) + 1)
                  if all(tail(g, n) != tail(f, n) for g in same)), None)
        out[f] = str(f) if n is None else tail(f, n)
    return out


def _print(exp: Experiment, fmt: str, chunk_results: list[ChunkEvalResult | None]) -> None:
    """The experiment on stdout in ``fmt``."""
    from rich.table import Table
    from rich.text import Text

    from aiblox.experiment.table import PAIR_HEAD
    from aiblox.metrics.marks import value_text

    if fmt == "json":
        data = exp.as_json()
        for d, c in zip(data["systems"], chunk_results, strict=True):
            d["chunks"] = c.model_dump(mode="json") if c is not None else None
        print_json(data)
        return
    if fmt in ("markdown", "latex", "csv"):
        text = {"markdown": exp.to_markdown, "latex": exp.to_latex, "csv": exp.to_csv}[fmt]()
        out.print(text, end="", markup=False, highlight=False, soft_wrap=True)
        return
    table = Table(title=exp.title())
    table.add_column("system")
    for m in exp.metrics:
        table.add_column(m, justify="right")
    table.add_column("q/s", justify="right")
    for s in exp.systems:  # a compared value: its delta and adjusted p on a second line
        qps = f"{s.timings['qps']:.0f}" if "qps" in s.timings else "-"
        table.add_row(Text(exp.label(s)), *(Text("\n".join(
            filter(None, (value_text(s.metrics[m]), exp.detail(s, m))))) for m in exp.metrics),
            qps)
    out.print(table)  # piped: as wide as the table (aiblox.cli._console)
    if exp.pairwise and len(exp.systems) > 1:
        pairs = Table(title=f"every pair of systems ({exp.split}): the system's mean minus the "
                            f"other's")
        for col in PAIR_HEAD:
            pairs.add_column(col, justify="right" if col in ("delta", "p (adjusted)", "W/T/L")
                             else "left")
        for row in exp.pair_rows():
            pairs.add_row(*(Text(c) for c in row))
        out.print(pairs)
    out.print(exp.footer(), markup=False, highlight=False)
    for s, c in zip(exp.systems, chunk_results, strict=True):
        if c is not None:
            recall = "  ".join(f"{k} {v:.4f}" for k, v in c.answer_recall.items())
            proj = "  ".join(f"{k} {v:.4f}" for k, v in c.projection_metrics.items())
            out.print(f"{s.name} chunks {c.chunker_id} ({c.n_queries} queries): {recall}  "
                      f"evidence tokens {c.evidence_tokens['all']:.1f}  "
                      f"{c.projection}: {proj}  {_chunk_counts(c)}",
                      markup=False, highlight=False)
    for s in exp.systems:
        hashes = "  ".join(f"{k} {s.hashes[k][:16]}" for k in ("run", "config", "file", "dataset")
                           if k in s.hashes)
        named = f" = {s.expression}" if s.expression not in (None, s.name) else ""
        out.print(f"{s.name}{named}: {hashes}", markup=False, highlight=False)
