"""The fine-tuning stage of a sweep: ``[finetune]`` in a spec fine-tunes the spec's embedder on
judged queries the sweep never scores, and every point is then retrieved with the tuned model.

What is trained on: the judged queries of ``[finetune] split`` less every query of the sweep's
tune and report splits, by id or by text (a query is never on both sides, under another id
either: :func:`training_query_ids`), each with every document judged
relevant to it (grade >= 1), plus ``hard_negatives`` drawn from its top ``negative_depth``
full-text (BM25, the spec's ``[base]`` full-text settings) documents not judged relevant. With
``tune_split = "train:0/5"`` and ``[finetune] split = "train"``, the model learns from the other
four fifths of train and the fusion around it is chosen on the fifth it never saw; test is
reported as always. A split whose every query the sweep scores is refused when the spec loads;
one the dataset lacks, or one its data leaves empty, before anything is logged
(:func:`check_training`); a ``negative_depth`` that leaves a query no candidate when the pairs
are drawn: each naming its field, which ``aiblox sweep`` shows at its line of the spec. The
spec's ``vectors`` files, which the store reads only once the model is trained, are checked
before it trains (:func:`check_spec_vectors`: file, row and field).

The stage's key is the sha256 of the base model's id, the dataset's hash, the split and the
query ids trained on, the full-text settings that drew the negatives and the recipe
(:class:`aiblox.embedding.finetune.FineTuneConfig`). The model trains on the sweep's device (the
spec's ``device``, ``aiblox sweep --device``); off the CPU the base model's id carries the
device class (``all-MiniLM-L6-v2+cuda``), so a model trained on a GPU is another key, and
another folder, than the one trained on the CPU, whose key is what it was before devices.

The tuned model is a folder ``<cache-dir>/models/ft-<16 hex of the key>`` beside a local stage
cache, written under a temporary name and renamed: a killed run leaves nothing under the real name,
and a finished one is never trained again. With a remote stage cache (``s3://``, any fsspec URI) the
folder is ``.aiblox/models/ft-<16 hex>`` on the machine that trains it, published to the cache's
``models/`` (``files.json``, every file's sha256, last) so that another machine of the team copies
it (each file checked) instead of training it again. Its model id, which keys the embedding cache,
every signals stage and the points' config hashes, is the sha256 of its files
(:func:`aiblox.embedding.sentence_transformers.model_digest`), so ``aiblox eval verify`` of a point
checks the very weights it was scored with.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aiblox.data import Dataset, load_dataset
from aiblox.embedding.device import describe_device, resolve_device
from aiblox.embedding.finetune import RECIPE_FILE, TrainingPair, fine_tune
from aiblox.embedding.sentence_transformers import model_folder
from aiblox.engine.cache import StageCache, local_cache_root
from aiblox.engine.claims import claimed
from aiblox.engine.compute import signals_output
from aiblox.hashing import sha256_bytes, sha256_hex
from aiblox.progress import phase, progress_bar
from aiblox.sweep.spec import FineTuneSpec, SweepSpec

__all__ = ["FINETUNE_VERSION", "FineTuneSpec", "base_model_folder", "check_spec_vectors",
           "check_training", "ensure_fine_tuned", "fine_tuned_folder", "finetune_key",
           "shared_model", "training_data", "training_pairs", "training_query_ids"]

FINETUNE_VERSION = 1
"""Bumped when the stage's training set or recipe changes meaning (a new key, a new model)."""


def base_model_folder(embedder: str) -> Path:
    """The sentence-transformers folder the embedder ``embedder`` loads
    (:func:`aiblox.embedding.sentence_transformers.model_folder`); ``ValueError`` for an
    embedder that is not a sentence-transformers model (``hashing``)."""
    found = model_folder(embedder)
    if found is None:
        raise ValueError(f"finetune: the embedder {embedder!r} is not a sentence-transformers "
                         f"model (use minilm, a model folder or an installed model package)")
    return found


def _split_qids(ds: Dataset, split: str) -> set[str]:
    return {q for q, _ in ds.split_queries(split)}


def query_text_key(text: str) -> str:
    """A query's text as held-out queries are compared by: NFKC, case-folded, whitespace runs
    as one space, trimmed."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def training_query_ids(spec: SweepSpec, train: Dataset, scored: Dataset,
                       table: str = "finetune") -> list[str]:
    """The judged queries of ``[table] split`` (``finetune``, ``finetune_reranker``; in
    ``train``) that are in neither of the sweep's splits (in ``scored``), by id or by text
    (:func:`query_text_key`), sorted; ``ValueError`` naming ``<table>.split`` when none is
    left. By text too: a dataset may judge one query under two ids, one per split (scifact's
    train 871 is its test 870, "Obesity decreases life quality.", judged relevant to the same
    document), and a model trained on it has learned a reported query's answer."""
    split = getattr(spec, table).split
    held = set().union(*(_split_qids(scored, s) for s in spec.splits))
    held_texts = {query_text_key(scored.queries[q]) for q in held}
    qids = sorted(q for q in _split_qids(train, split) - held
                  if query_text_key(train.queries[q]) not in held_texts)
    if not qids:
        raise ValueError(f"{table}.split = {split!r}: no query of it is left to train on once "
                         f"the tune and report splits' queries ({', '.join(spec.splits)}) are "
                         f"held out: train on another split, or score only a part of this one")
    return qids


def training_data(spec: SweepSpec, table: str = "finetune") -> Dataset:
    """The spec's dataset with ``[table] split`` loaded; ``ValueError`` naming
    ``<table>.split`` for a split the dataset does not have."""
    from aiblox.data import parse_split
    from aiblox.data.find import available_splits, find_dataset

    split = getattr(spec, table).split
    parsed = parse_split(split)
    base = split if parsed is None else parsed[0]
    known = available_splits(find_dataset(spec.dataset))
    if base not in known:
        raise ValueError(f"{table}.split = {split!r}: the dataset {spec.dataset!r} has no split "
                         f"{base!r} (its splits: {', '.join(known) or 'none'}): train on one of "
                         f"them")
    return load_dataset(spec.dataset, splits=[split])


def check_training(spec: SweepSpec, scored: Dataset) -> None:
    """What the spec's training tables (``[finetune]``, ``[finetune_reranker]``) need of the
    dataset, checked before anything is built or logged (``aiblox sweep`` calls it with the
    sweep's dataset, ``scored``): a split it has (:func:`training_data`), with a judged query
    left once the sweep's splits are held out (:func:`training_query_ids`). ``ValueError``
    naming the field (``finetune.split = 'dev': ...``)."""
    for table in ("finetune", "finetune_reranker"):
        if getattr(spec, table) is not None:
            training_query_ids(spec, training_data(spec, table), scored, table)


def check_spec_vectors(spec: SweepSpec, ds: Dataset, cache_dir: str | Path, device: str) -> None:
    """A sweep that trains a model (``[finetune]``, ``[finetune_reranker]``) and reads vectors:
    its ``vectors`` files checked row by row as the store's sync checks them
    (:func:`aiblox.engine.workspace.check_vectors`: columns, dimension, finite values, ids and
    text hashes against ``ds``) before the model trains, since the store syncs, and reads
    them, only once it is trained (minutes to half an hour later). ``aiblox sweep`` calls it
    before anything is logged, :func:`~aiblox.sweep.runner.run_sweep` before a model trains;
    a sweep that trains nothing syncs its store first, which refuses a bad file before its
    first write. ``device``: the sweep's (the fine-tuned model's key, and so its folder,
    follows it).

    With ``[finetune]`` the sweep embeds with the model it trains (of the base model's
    dimension): a file that says which model made it (its name or parquet metadata,
    :func:`~aiblox.embedding.vectors.vectors_model`) is refused unless it names that very
    model (``st:ft-<16 hex of its key>@...``, checked against its files when the store syncs):
    the base model's vectors, or another training's, are never its vectors.
    :class:`~aiblox.embedding.VectorImportError` naming the file, row and field."""
    if not spec.vectors or not spec.settings().needs_vectors:
        return  # read by no point: the workspace warns and reads none
    if spec.finetune is None and spec.finetune_reranker is None:
        return
    from aiblox.embedding import get_embedder
    from aiblox.embedding.vectors import check_untrained_model
    from aiblox.engine.workspace import check_vectors as check_files

    base = get_embedder(spec.embedder, device=device)
    if spec.finetune is None:  # a reranker trains: the embedder is the spec's
        check_files(ds, spec.vectors, base.model_id, base.dim)
        return
    folder = fine_tuned_folder(spec, ds, cache_dir, device)
    ours = f"st:{folder.name}@"
    for f in spec.vectors:
        check_untrained_model(f, f"the model [finetune] trains from {spec.embedder} "
                                 f"({folder.name})", lambda model: model.startswith(ours))
    check_files(ds, spec.vectors, ours, base.dim, claims=False)


def finetune_key(spec: SweepSpec, train: Dataset, base_id: str, qids: list[str]) -> str:
    """The fine-tuning stage's key (see the module doc)."""
    assert spec.finetune is not None
    recipe = spec.finetune.recipe()
    fts = spec.base_prefs().fts.model_dump(mode="json") if recipe.hard_negatives else None
    return sha256_hex({"stage": "finetune", "version": FINETUNE_VERSION, "base": base_id,
                       "dataset": train.hash, "split": spec.finetune.split,
                       "queries": sha256_hex(qids), "negatives": fts,
                       "recipe": recipe.model_dump(mode="json")})


def models_root(cache_root: Path | str) -> Path:
    """Where trained models live: ``models/`` beside a local stage cache, else
    ``.aiblox/models`` (a remote cache gets a copy, :func:`_publish`)."""
    local = local_cache_root(cache_root)
    return (local if local is not None else Path(".aiblox")) / "models"


def train_once(folder: Path, train: Callable[[Callable[[int, int, float], None]], object], *,
               steps: int, bar: str, phase_text: str, progress: bool) -> bool:
    """Run ``train(on_step)`` into ``folder`` under a bar of ``steps`` steps (showing the loss)
    and a phase line: True when it trained ``folder``, False when it failed (``ValueError``)
    because another process finished ``folder`` first (its recipe file is there); any other
    failure is raised."""
    steps_bar = progress_bar(steps, bar, unit="step", enabled=progress)

    def step(n: int, total: int, loss: float) -> None:
        steps_bar.update(1)
        steps_bar.set_postfix(loss=f"{loss:.3f}")

    with phase(phase_text, enabled=progress):
        folder.parent.mkdir(parents=True, exist_ok=True)
        try:
            train(step)
        except ValueError:
            if (folder / RECIPE_FILE).is_file():  # another process finished it first
                return False
            raise
        finally:
            steps_bar.close()
    return True


def training_pairs(spec: SweepSpec, train: Dataset, qids: list[str], db: str | None,
                   progress: bool = False) -> list[TrainingPair]:
    """The training pairs of ``qids`` (:func:`training_query_ids`): each judged relevant
    document of a query, with its candidates for hard negatives (its top ``negative_depth``
    BM25 documents on the store ``db`` not judged relevant; None: the dataset's own store)."""
    assert spec.finetune is not None
    recipe = spec.finetune.recipe()
    split = spec.finetune.split
    judged = train.qrels[split]
    negatives: dict[str, list[str]] = {q: [] for q in qids}
    if recipe.hard_negatives:
        from aiblox.engine.workspace import open_workspace

        base = spec.base_prefs()
        prefs = base.model_copy(update={
            "mode": "bm25", "fts": base.fts.model_copy(update={"top_k": recipe.negative_depth})})
        ws = open_workspace(train, db, spec.embedder, with_vectors=False, progress=progress)
        try:
            sig = signals_output(ws.retriever, train, split, prefs, progress=progress)
        finally:
            ws.close()
        for q, hits in zip(sig["qids"], sig["text"], strict=True):
            if q in negatives:
                negatives[q] = [d for d, _ in hits if judged[q].get(d, 0) < 1]
        empty = [q for q in qids if not negatives[q]
                 and any(g >= 1 and d in train.corpus for d, g in judged[q].items())]
        if empty:
            raise ValueError(
                f"finetune.negative_depth = {recipe.negative_depth}: the query {empty[0]!r} "
                f"({train.queries[empty[0]]!r}; {len(empty)} of {len(qids)} queries) has no "
                f"document among its top {recipe.negative_depth} BM25 documents that is not "
                f"judged relevant, so hard_negatives = {recipe.hard_negatives} has nothing to "
                f"draw from: raise negative_depth, or set hard_negatives = 0 (in-batch "
                f"negatives only)")
    pairs = []
    for q in qids:
        cands = tuple(train.corpus[d].embedding_text for d in negatives[q])
        for d, grade in sorted(judged[q].items()):
            if grade >= 1 and d in train.corpus:
                pairs.append(TrainingPair(train.queries[q], train.corpus[d].embedding_text,
                                          cands))
    return pairs


def fine_tuned_folder(spec: SweepSpec, scored: Dataset, cache_root: Path | str,
                      device: str | None = None) -> Path:
    """The folder :func:`ensure_fine_tuned` trains ``spec``'s model into, or finds it in
    (``ft-<16 hex of the key>``), known before it trains: what a ``vectors`` file made with
    that very model names (``st:ft-<16 hex>@...``)."""
    key = _planned(spec, scored, resolve_device(device or spec.device, "device"))[3]
    return models_root(cache_root) / f"ft-{key[:16]}"


def _planned(spec: SweepSpec, scored: Dataset, device: str
             ) -> tuple[Dataset, list[str], str, str]:
    """``(training data, query ids trained on, base model id, the stage's key)``."""
    from aiblox.engine.context import embedder_id

    train = training_data(spec)
    qids = training_query_ids(spec, train, scored)
    base_id = embedder_id(spec.embedder, device)
    return train, qids, base_id, finetune_key(spec, train, base_id, qids)


def ensure_fine_tuned(spec: SweepSpec, scored: Dataset, cache_root: Path | str,
                      db: str | None = None, progress: bool = True,
                      device: str | None = None) -> Path:
    """The folder of ``spec``'s fine-tuned model, trained now on ``device`` (None: the spec's
    ``device``) unless a finished one is there (see the module doc). ``scored`` is the sweep's
    dataset (its tune and report splits)."""
    assert spec.finetune is not None
    ft = spec.finetune
    device = resolve_device(device or spec.device, "device")
    train, qids, base_id, key = _planned(spec, scored, device)
    folder = models_root(cache_root) / f"ft-{key[:16]}"

    def train_it() -> bool:
        pairs = training_pairs(spec, train, qids, db, progress)
        record: dict[str, Any] = {"base": base_id, "dataset": train.name,
                                  "dataset_hash": train.hash, "split": ft.split,
                                  "queries": len(qids), "key": key}
        return train_once(folder, lambda on_step: fine_tune(
            base_model_folder(spec.embedder), pairs, folder, ft.recipe(), device=device,
            record=record, on_step=on_step),
            steps=ft.epochs * -(-len(pairs) // ft.batch_size),
            bar=f"finetune: {spec.embedder} on {len(pairs)} pairs ({len(qids)} queries of "
                f"{ft.split}) on {device}",
            phase_text=f"finetune: {len(pairs)} pairs, {ft.epochs} epoch(s) on "
                       f"{describe_device(device)}", progress=progress)

    return shared_model(folder, cache_root, train_it)


def shared_model(folder: Path, cache_root: Path | str, train: Callable[[], bool]) -> Path:
    """``folder``, a trained model (the embedder's or a reranker's): as it is when finished
    (its recipe file there); with a remote stage cache, copied from the cache's ``models/``
    when another machine published it (:func:`_fetch`); else trained now by ``train()`` (True:
    this process trained it, False: another process finished it first, :func:`train_once`)
    and, trained here with a remote cache, published to it (:func:`_publish`) so that the
    team's other machines copy it instead of training it again. While one process trains it,
    another one asking for it waits for it (:func:`~aiblox.engine.claims.claimed`)."""
    remote = None if local_cache_root(cache_root) is not None else StageCache(cache_root)
    if (folder / RECIPE_FILE).is_file() or (remote is not None and _fetch(remote, folder)):
        return folder

    def waiting(who: dict[str, Any]) -> None:
        print(f"{folder.name}: process {who.get('pid', '?')} on {who.get('host', '?')} is "
              f"training it; waiting for it (not training it twice)", file=sys.stderr)

    # a second sweep started beside the first waits for its model instead of training it too
    with claimed(folder.with_name(f"{folder.name}.claim"),
                 done=lambda: (folder / RECIPE_FILE).is_file(), waiting=waiting) as mine:
        if mine and train() and remote is not None:
            _publish(remote, folder)
    return folder


def _publish(cache: StageCache, folder: Path) -> None:
    """Copy a trained model folder into a remote stage cache (``models/<folder name>/...``),
    ``files.json`` (every file's sha256) last: a reader that finds it finds every file."""
    files = {p.relative_to(folder).as_posix(): p for p in sorted(folder.rglob("*"))
             if p.is_file()}
    digests = {}
    for rel, path in files.items():
        data = path.read_bytes()
        cache.write_file(_MODELS, f"{folder.name}/{rel}", data)
        digests[rel] = sha256_bytes(data)
    cache.write_file(_MODELS, f"{folder.name}/{_FILES}",
                     json.dumps(digests, sort_keys=True).encode("utf-8"))


def _fetch(cache: StageCache, folder: Path) -> bool:
    """Copy a model another worker trained from a remote stage cache to ``folder`` (each
    file's sha256 checked, written under a temporary name and renamed); False when the cache
    has none (or a damaged one: trained again)."""
    listing = cache.read_file(_MODELS, f"{folder.name}/{_FILES}")
    if listing is None:
        return False
    tmp = folder.with_name(f".{folder.name}.{os.getpid()}.fetch")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        for rel, digest in sorted(json.loads(listing).items()):
            data = cache.read_file(_MODELS, f"{folder.name}/{rel}")
            if data is None or sha256_bytes(data) != digest:
                return False
            (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp / rel).write_bytes(data)
        os.replace(tmp, folder)
    except OSError:
        if not (folder / RECIPE_FILE).is_file():
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return True


_MODELS = "models"
_FILES = "files.json"
