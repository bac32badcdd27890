"""Helpers shared by the CLI commands: opening stores and embedders, printing results."""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args, get_origin

import typer

# the commands' consoles, re-exported: results (tables, reports, ``--json``) go to stdout
# (``out``), progress and informational lines to stderr (``console``)
from aiblox.cli._console import console, out  # noqa: F401

if TYPE_CHECKING:  # imported where used: a command's startup imports no store or model code
    from pydantic import BaseModel
    from rich.text import Text

    from aiblox.contracts.retrieval import RetrievalPrefs
    from aiblox.embedding import CachedEmbedder, Embedder
    from aiblox.stores import Store

DB_HELP = ("Store: a DuckDB file path or a postgresql+psycopg:// URL (default: the dataset's "
           "own store under .aiblox/datasets).")
STORE_HELP = "Store: a DuckDB file path or a postgresql+psycopg:// URL (or use --dataset)."
DATASET_STORE_HELP = ("Use this dataset's default store (the one `aiblox ingest DATASET` "
                      "builds) instead of --db.")
DEVICE_HELP = ("Where the embedder runs: auto (the first GPU torch sees, else the CPU), cpu, "
               "cuda, cuda:N or mps. Off the CPU its vectors are keyed apart (model id "
               "+cuda): a store embedded on the CPU is searched with --device cpu.")


def fail(message: str) -> None:
    """Print ``error: message`` as one line and exit with status 2."""
    from aiblox.cli._errors import print_error

    print_error(message)
    raise typer.Exit(2)


def checked_db(db: str, option: str = "--db") -> str:
    """``db`` when it names a store (a file path, ``duckdb:///PATH`` or a PostgreSQL URL), else
    one ``error:`` line naming the forms a store takes, the URL's password masked: a
    ``mysql://`` URL or a misspelt ``postgress://`` was taken for a DuckDB file path, made
    under the working folder."""
    from aiblox.stores import StoreError, mask_password, store_backend

    try:
        store_backend(db)
    except StoreError as exc:
        fail(f"{option} {mask_password(db)}: {exc}")
    return db


def open_db(db: str, embedder: Embedder | None = None, name: str = "") -> Store:
    """Open the store at ``db`` (shared: other processes may read it meanwhile) or exit with a
    clear message. A command that writes vectors gives its ``embedder`` (``name``: as the
    user named it): a new store is made at its dimension, and a store of another dimension is
    one ``error:`` line before anything is written. A reader gives none: the store opens at the
    dimension it holds, whatever embedder built it."""
    from aiblox.stores import StoreBusy, mask_password, open_store

    dim = None if embedder is None else embedder.dim
    local = checked_db(db).removeprefix("duckdb:///")
    held_file = "://" not in local and local != ":memory:" and Path(local).exists()
    try:  # a DuckDB file there is opened at its own dimension, compared below
        store = open_store(db, dim=None if held_file else dim, shared=True)
    except StoreBusy as exc:
        fail(str(exc))
        raise  # unreachable
    except Exception as exc:  # noqa: BLE001 - shown to the user, not swallowed
        fail(f"cannot open store {mask_password(db)}: {exc}")
        raise  # unreachable
    held = getattr(store, "dim", dim)
    if dim is not None and held != dim:
        store.close()
        fail(f"store {mask_password(db)} holds {held}-dim vectors and --embedder "
             f"{name or 'given'} makes {dim}-dim ones: a store holds vectors of one dimension; "
             f"give this embedder another store (--db)")
    return store


def open_existing_store(db: str, dataset: str) -> Store:
    """Open :func:`existing_store` (never creating a store)."""
    return open_db(existing_store(db, dataset))


def existing_store(db: str, dataset: str) -> str:
    """The store a command reads: ``--db``, or the default store of ``--dataset``. A DuckDB file
    that does not exist is an error (it is never created here)."""
    if db and dataset:
        fail("give --db or --dataset, not both")
    if dataset:
        from aiblox.data import DatasetError
        from aiblox.engine.workspace import default_store_path

        try:
            db = default_store_path(dataset)
        except DatasetError as exc:
            fail(str(exc))
        if not Path(db).exists():
            fail(f"dataset {dataset!r} has no store yet ({db}): run `aiblox ingest {dataset}`")
    if not db:
        fail("name a store: --db PATH (or URL), or --dataset NAME for the store `aiblox ingest "
             "NAME` builds")
    local = db.removeprefix("duckdb:///")
    if "://" not in local and local != ":memory:" and not Path(local).exists():
        fail(f"no store at {db}: build one with `aiblox ingest DATASET --db {db}`")
    return db


def cached_embedder(name: str | Embedder, store: Store, progress: bool = True,
                    device: str | None = None) -> CachedEmbedder:
    """The named (or given) embedder behind the store's embedding cache (a name built on
    ``device``)."""
    from aiblox.embedding import CachedEmbedder, get_embedder

    try:
        model = get_embedder(name, device=device) if isinstance(name, str) else name
        return CachedEmbedder(model, store, progress=progress)
    except (ValueError, ImportError) as exc:
        fail(str(exc))
        raise


def size_text(n: float) -> str:
    """Bytes for people: ``512 B``, ``3.4 KiB``, ``1.2 MiB``, ``5.0 GiB``."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def print_json(value: Any) -> None:
    """One JSON object on stdout."""
    typer.echo(json.dumps(value, sort_keys=True, ensure_ascii=False))


def show_progress() -> bool:
    """Whether to show progress (:func:`aiblox.progress.progress_on`): not with ``--quiet`` or
    ``AIBLOX_NO_PROGRESS``; bars on a terminal, plain lines on a log or pipe."""
    from aiblox.progress import progress_on

    return progress_on()


def checked_choice(value: str, choices: Iterable[str], option: str) -> str:
    """``value`` when it is one of ``choices``, else one ``error:`` line naming ``option`` and
    the valid choices (exit 2, before any work)."""
    valid = list(choices)
    if value not in valid:
        fail(f"{option} {value!r}: not one of {', '.join(valid)}")
    return value


def checked_at_least(value: int, minimum: int, option: str, maximum: int | None = None) -> int:
    """``value`` when it is at least ``minimum`` (and at most ``maximum``, when given), else one
    ``error:`` line naming ``option`` in the contracts' words (``--top -1: out of range;
    valid: a whole number >= 1``, with ``(at most 2147483647)`` when there is a maximum: both
    bounds in one line, whichever was crossed; exit 2, before any work)."""
    if value < minimum or (maximum is not None and value > maximum):
        most = f" (at most {maximum})" if maximum is not None else ""
        fail(f"{option} {value}: out of range; valid: a whole number >= {minimum}{most}")
    return value


def stored_text(value: object, style: str = "") -> Text:
    """Stored text (a question, a tenant, an id, a label, a folder name) as a listing shows it:
    never read as rich markup, its control and bidi characters written as escapes
    (:func:`aiblox.text.escape_controls`): an escape sequence in a stored question reached the
    terminal raw through ``aiblox pack list``."""
    from rich.text import Text

    from aiblox.text import escape_controls

    return Text(escape_controls(str(value)), style=style)


def checked_alpha(alpha: float, option: str = "--alpha") -> float:
    """A significance level strictly between 0 and 1, else one ``error:`` line (a level of 5
    would mark every delta significant)."""
    if not 0 < alpha < 1:
        fail(f"{option} must be between 0 and 1, got {alpha}")
    return alpha


def field_choices(model: type[BaseModel], name: str) -> list[str]:
    """The values a ``Literal`` field of a contract model accepts (so the CLI's choices are
    the contract's, never a copy that drifts)."""
    ann = model.model_fields[name].annotation
    while get_origin(ann) is not Literal and get_args(ann):  # tuple[Literal[...], ...]
        ann = get_args(ann)[0]
    return [str(v) for v in get_args(ann)]


def checked_device(device: str, option: str = "--device") -> str:
    """``device`` checked before any work (its form; a GPU asked for must be one torch sees),
    else one ``error:`` line naming ``option``. ``auto`` comes back as it is (resolved where a
    model runs, so a command that runs none never imports torch to ask); any other device
    resolved (``cuda`` is ``cuda:0``)."""
    from aiblox.embedding.device import DeviceError, parse_device, resolve_device

    try:
        spec = parse_device(device, option)
        return spec if spec == "auto" else resolve_device(spec, option)
    except DeviceError as exc:
        fail(str(exc))
        raise


def checked_embedder(name: str, device: str | None = None) -> Embedder:
    """The embedder ``name`` on ``device`` (built, its model not loaded yet), else one
    ``error:`` line with the known names (before any store is opened)."""
    from aiblox.embedding import get_embedder

    try:
        return get_embedder(name, device=device)
    except (ValueError, ImportError) as exc:
        fail(f"--embedder: {exc}")
        raise


def checked_chunker(name: str, sizes: Mapping[str, int | None] | None = None) -> None:
    """One ``error:`` line with the known chunkers unless ``name`` is one (before any work);
    one ``warning:`` line naming the options of ``sizes`` (``{"--max-tokens": 64}``) that
    were given to a chunker with no token budget (``whole``: its chunks are the same)."""
    from aiblox.chunking import UnknownChunkerError, get_chunker

    try:
        chunker = get_chunker(name)
    except (UnknownChunkerError, ValueError) as exc:
        fail(f"--chunker: {exc}")
    given = [f"{k} {v}" for k, v in (sizes or {}).items() if v is not None]
    if given and not getattr(chunker, "sized", True):
        from aiblox.cli._errors import print_error

        print_error(f"{', '.join(given)}: the {name} chunker keeps each document as one "
                    f"chunk, with no token budget or overlap: ignored", prefix="warning")


def checked_chunk_sizes(chunking: Any) -> None:
    """One ``error:`` line, before any work, when the chunker of ``chunking`` (a
    ``ChunkingConfig``) refuses its sizes (an overlap not below the budget), naming them as
    ``--max-chunk-tokens`` and ``--overlap-tokens`` (the options of ``eval`` and ``index
    build``)."""
    from aiblox.chunking import make_chunker

    try:
        make_chunker(chunking)
    except ValueError as exc:
        fail(str(exc).replace("overlap_tokens", "--overlap-tokens").replace(
            "max_chunk_tokens", "--max-chunk-tokens"))


def checked_prefs(data: dict[str, Any], options: Mapping[str, tuple[str, Any]]
                  ) -> RetrievalPrefs:
    """``RetrievalPrefs`` of ``data``, or one ``error:`` line (exit 2, before any work) when the
    contract refuses a value: naming the option as the user typed it, the value and the valid
    values (``--depth 0: out of range; valid: a whole number >= 1``), never pydantic's field
    path. ``options`` maps a field's dotted path (``fts.top_k``) to ``(option, value given)``."""
    from pydantic import ValidationError

    from aiblox.contracts.retrieval import RetrievalPrefs

    try:
        return RetrievalPrefs.model_validate(data)
    except ValidationError as exc:
        fail(option_problems(exc, options))
        raise  # unreachable


def option_problems(exc: Any, options: Mapping[str, tuple[str, Any]]) -> str:
    """The errors of a ``RetrievalPrefs`` validation as options (see :func:`checked_prefs`):
    a field's error names its option and value; an error of a whole section (linear weights
    summing to 0) has the fields it names written as their options."""
    from aiblox.contracts.problems import value_problem
    from aiblox.contracts.retrieval import RetrievalPrefs

    parts = []
    for err in exc.errors():
        path = ".".join(str(x) for x in err.get("loc", ()))
        problem = value_problem(RetrievalPrefs, err)
        if path in options:
            option, value = options[path]
            parts.append(f"{option} {value}: {problem}")
            continue
        named = False
        for field, (option, _) in options.items():
            if not path or field.startswith(path + "."):
                leaf = re.escape(field.rsplit(".", 1)[-1])
                problem, n = re.subn(rf"(?<![\w-]){leaf}\b", option, problem)
                named = named or n > 0
        parts.append(problem if named or not path else f"{path}: {problem}")
    return "; ".join(dict.fromkeys(parts))


def option_message(exc: BaseException) -> str:
    """A validation error of options as one line without pydantic's boilerplate (its type
    tags and web links): :func:`aiblox.cli._errors.fault_message`."""
    from aiblox.cli._errors import fault_message

    return fault_message(exc) or str(exc)


def embedder_name(model_id: str) -> str | None:
    """The registered embedder name whose model is ``model_id`` on whatever device (None for
    another model)."""
    from aiblox.embedding import registry

    return registry.name_of(model_id)


def check_store_searchable(store: Store, model_id: str | None, embedder: str,
                           bm25_hint: bool = True, dim: int | None = None) -> None:
    """One ``error:`` line with the command to run (exit 2) when a search on ``store`` would
    come back empty or incomplete: no items, an unfinished ingest, or (``model_id`` given, a
    dense or hybrid search) no vectors of that model, naming the embedder(s) the store was
    built with (``bm25_hint``: and that ``--mode bm25`` needs no vectors; ``dim``: the
    embedder's dimension, whose vectors this store cannot take when it holds another)."""
    from aiblox.stores import StoreError
    from aiblox.stores.identity import check_searchable, read_binding, read_sync, stored_counts

    try:
        check_searchable(store, None)
    except StoreError as exc:
        fail(str(exc))
    n_items, n_vec = stored_counts(store, model_id)
    if model_id is None or n_vec is None or n_vec >= n_items:
        return
    record = read_sync(store)
    built = sorted(m for m in (record.vectors if record else {}) if m != model_id)
    binding = read_binding(store)
    source = binding.source if binding is not None else "DATASET"
    ingest = f"`aiblox ingest {source} --db {store.location} --embedder {embedder}`"
    bm25 = "; --mode bm25 needs no vectors" if bm25_hint else ""
    if n_vec:  # some hold this model's vectors: an ingest with another embedder changed others
        fail(f"store {store.location}: {n_vec} of {n_items} items have {model_id} vectors "
             f"(--embedder {embedder}), so vector and hybrid search would miss the other "
             f"{n_items - n_vec} (changed by an ingest with another embedder?): add them with "
             f"{ingest}{bm25}")
    if built:
        from aiblox.embedding.device import split_device

        base, cls = split_device(model_id)
        same = [split_device(m)[1] for m in built if split_device(m)[0] == base]
        if same:  # the same model, embedded on another device
            use = " or ".join(f"--device {c}" for c in same)
            fail(f"store {store.location} holds {embedder} vectors made on "
                 f"{' and '.join(same)}, not on {cls} ({model_id}; another device gives other "
                 f"last bits, so its vectors are keyed apart): run with {use}, or add {cls} "
                 f"vectors with {ingest[:-1]} --device {cls}`{bm25}")
        names = [embedder_name(m) for m in built]
        use = " or ".join(f"--embedder {n}" for n in names if n) or "--embedder for that model"
        held = getattr(store, "dim", None)
        add = (f", or add {model_id} vectors with {ingest}" if dim is None or held == dim else
               f" (a store of {held}-dim vectors: {model_id}'s have {dim}; ingest them into "
               f"another store)")
        fail(f"store {store.location} was built with {', '.join(built)} vectors, not "
             f"{model_id} (--embedder {embedder}): run with {use}{add}{bm25}")
    try:
        check_searchable(store, model_id)
    except StoreError as exc:
        fail(f"{exc}{bm25}")


def checked_metrics(names: list[str], option: str = "--metric") -> list[str]:
    """``names`` when every one is a ranx metric, else one ``error:`` line naming ``option``
    (before any work: a typo must not cost a whole evaluation)."""
    from aiblox.metrics.names import validate_metrics

    try:
        return validate_metrics(names, distinct=True)
    except ValueError as exc:
        fail(f"{option}: {exc}")
        raise  # unreachable


def writable_folder(path: str | Path, option: str) -> list[Path]:
    """Create ``path`` (with parents) and check a file can be written in it, before any work;
    else one ``error:`` line naming ``option`` (a read-only or full disk, a path through a
    regular file). Returns the folders it created, deepest first (for :func:`remove_empty`
    when the command then fails)."""
    import tempfile

    from aiblox.cli._errors import fault_message

    folder = Path(path)
    made = [p for p in (folder, *folder.parents) if not p.exists()]
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".aiblox-write-check-"):
            pass
    except OSError as exc:
        remove_empty(made)
        fail(f"{option} {path}: cannot write there: {fault_message(exc)}")
    return made


def remove_empty(folders: Iterable[Path]) -> None:
    """Remove each of ``folders`` (deepest first) that is empty: what a failed command
    created for its output and did not fill."""
    for f in folders:
        try:
            f.rmdir()
        except OSError:
            return  # not empty (or gone): its parents are not either


def outputs_spare_inputs(outputs: dict[Path, str], inputs: dict[Path, str],
                         folders: dict[Path, str]) -> None:
    """One ``error:`` line, before any work, when a file a command would write (``outputs``:
    path -> the option writing it) is one it reads (``inputs``: path -> what it is) or lies
    in a folder it reads (``folders``: a dataset's, whose next load may read a table or a
    qrels file written there, or miss one replaced). ``--save-runs runs/`` beside ``--run
    runs/x.trec`` replaced the user's run with aiblox's copy (or another system's);
    ``--per-query`` over a qrels file destroyed the dataset, both silently. A file is the same
    by its path with links resolved, or, for an output already there, by its device and
    inode (:func:`file_identity`): a hard link to a qrels file, or to a ``--run`` file, under
    another name is that file, and writing it overwrote the dataset."""
    def real(p: Path) -> Path:
        return Path(os.path.realpath(p))

    read = {real(p): what for p, what in inputs.items()}
    same = {ident: (p, what) for p, what in inputs.items()
            if (ident := file_identity(p)) is not None}
    within = {real(p): what for p, what in folders.items()}
    for path, option in outputs.items():
        target, ident = real(path), file_identity(path)
        if target in read:
            fail(f"{option}: {path} is {read[target]}, which this command reads: it would be "
                 f"overwritten; write the output elsewhere")
        if ident is not None and ident in same:
            linked, what = same[ident]
            fail(f"{option}: {path} is {what} ({linked}: the same file, a hard link), which "
                 f"this command reads: it would be overwritten; write the output elsewhere")
        for folder, what in within.items():
            if target.is_relative_to(folder):
                fail(f"{option}: {path} is inside the folder of {what} ({folder}), which this "
                     f"command reads: a file written there may replace one of it or be read "
                     f"as part of it; write the output elsewhere")
            hit = _linked_within(folder, path, ident)
            if hit is not None:
                fail(f"{option}: {path} is {hit} (the same file, a hard link), inside the "
                     f"folder of {what} ({folder}), which this command reads: it would be "
                     f"overwritten; write the output elsewhere")


def file_identity(path: Path) -> tuple[int, int] | None:
    """The file at ``path`` as its device and inode (links followed), None when there is
    none: one file under two names (a hard link), which their resolved paths do not tell."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return st.st_dev, st.st_ino


def _linked_within(folder: Path, path: Path, ident: tuple[int, int] | None) -> Path | None:
    """The file under ``folder`` that the file at ``path`` (``ident``: its identity) is a hard
    link of, or None; only a file of more than one name is looked for."""
    try:
        if ident is None or os.stat(path).st_nlink < 2 or not folder.is_dir():
            return None
    except OSError:
        return None
    for root, _dirs, names in os.walk(folder):
        for name in names:
            if file_identity(Path(root) / name) == ident:
                return Path(root) / name
    return None


@contextlib.contextmanager
def undone_on_failure(made: list[list[Path]], tracking_uri: str | None = None
                      ) -> Iterator[None]:
    """The command's work; when it fails (an exception, an ``error:`` line's exit), what it
    made for its outputs and left unused is removed, so a failed command leaves nothing behind
    (QA: an empty ``--save-runs`` folder and a new MLflow database after a refused run file):
    each list of folders in ``made`` (:func:`writable_folder`'s, appended as they are made)
    where still empty, and the MLflow store of ``tracking_uri`` when the command made it and
    it holds nothing (:func:`aiblox.engine.tracking.remove_made_store`)."""
    store: list[Path] = []
    if tracking_uri is not None:
        from aiblox.engine.tracking.mlflow_store import new_tracking_files

        store = new_tracking_files(tracking_uri)
    try:
        yield
    except BaseException as exc:
        if not (isinstance(exc, typer.Exit) and exc.exit_code == 0):
            if store and tracking_uri is not None:
                from aiblox.engine.tracking.mlflow_store import remove_made_store

                remove_made_store(tracking_uri, store)
            for folders in made:
                remove_empty(folders)
        raise
