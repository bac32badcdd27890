"""Logged sweep points by name: the sweeps and points an MLflow store holds, and one point found
from whatever a person has at hand.

:func:`list_sweeps` lists the sweeps (parent runs, tag ``aiblox.kind = sweep``) newest first,
with their point counts and best point; :func:`list_points` lists one sweep's points (FINISHED
child runs) best first on the tune split, each with its full label, config hash, MLflow run id
and primary metric on the tune and report splits. ``aiblox runs`` prints both.

:func:`resolve_run` turns a reference into one point's run (:class:`RunRef`), trying in order:

1. a 32-hex MLflow run id of a run in the store;
2. ``SWEEP:LABEL``: the sweep by name (its newest parent run) or parent run id, then the point
   whose label is ``LABEL`` exactly, else the one point whose label starts with it, else
   ``best`` or ``baseline`` (the sweep's best point, its named baseline), else the one point
   whose config hash starts with it;
3. a sweep name or parent run id (only with ``sweep_best=True``): the sweep's best point;
4. a config-hash prefix (at least :data:`MIN_HASH_PREFIX` hex digits) matching one point;
5. else a run-hash prefix (as many digits) matching one logged run: the ``run`` hash ``aiblox
   eval`` prints (tag ``aiblox.trec_hash.<split>``) or a point's manifest run hash (tag
   ``aiblox.run_hash.<split>``, as ``aiblox report`` shows it).

A hash prefix matching several runs of one point (the same sweep, config hash, dataset hash and
splits: ``aiblox eval --mlflow`` run twice) is that point's latest finished run. A reference
matching several points raises :class:`AmbiguousRun` naming every candidate as ``SWEEP:LABEL``
(config hash, run id): a scored run file (no config) by its file's sha256 and dataset, and any
candidate by dataset and splits where the candidates differ in those; one matching none raises
``ValueError`` saying what was tried. The same config hash logged by two sweeps is two points:
qualify it with its sweep (``SWEEP:HASHPREFIX``). ``aiblox compare``, ``aiblox eval verify``
and the notebooks resolve through here. mlflow is imported lazily (the ``tracking`` extra).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict

from aiblox.engine.settings import ranking_order
from aiblox.engine.tracking import (
    find_sweep_run,
    metric_key,
    read_dataset_name,
    tag_filter,
    tracking_client,
)
from aiblox.engine.tracking.layout import (
    TAG_CONFIG,
    TAG_DATASET,
    TAG_KIND,
    TAG_PARENT,
    TAG_RUN_HASH,
    TAG_TREC_HASH,
)
from aiblox.hashing import short_hash

__all__ = [
    "MIN_HASH_PREFIX",
    "AmbiguousRun",
    "PointRow",
    "RunRef",
    "SweepRow",
    "deleted_best_note",
    "deleted_point_run",
    "interrupted_note",
    "list_points",
    "list_sweeps",
    "resolve_run",
]

MIN_HASH_PREFIX = 4
"""Fewest hex digits a bare config-hash prefix may have."""

_RUN_ID = re.compile(r"^[0-9a-f]{32}$")
_HEX = re.compile(r"^[0-9a-f]+$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class SweepRow(_Strict):
    """One logged sweep (a parent run)."""

    name: str
    """Sweep name (tag ``aiblox.sweep_name``)."""
    parent_run_id: str
    """MLflow parent run id."""
    status: str
    """The parent run's status (``FINISHED`` once the sweep ended)."""
    points: int
    """FINISHED child runs (logged points)."""
    primary: str
    """Metric the best point was chosen by."""
    tune_split: str
    """Split the best point was chosen on."""
    report_split: str | None
    """Split the best point is reported on (None: none)."""
    best_label: str | None
    """The best point's label (None until the sweep finished)."""
    best_config_hash: str | None
    """The best point's config hash."""
    best_tune: float | None
    """The best point's primary metric on the tune split."""
    best_report: float | None
    """The best point's primary metric on the report split."""
    deleted: int = 0
    """Point runs deleted from the store since the sweep logged them (MLflow's ``deleted``
    stage; ``mlflow runs restore --run-id ID`` brings one back): not counted in ``points``."""
    best_deleted_run_id: str | None = None
    """The best point's run id when it is one of them (the sweep's choice stands; its run is
    gone from every list until restored)."""
    interrupted: str | None = None
    """Why a sweep still ``RUNNING`` in MLflow is no longer running: the process that wrote it
    is gone (exited, killed, or silent past its lease;
    :func:`~aiblox.engine.tracking.owner.owner_status`); None for a finished or live sweep."""
    resume: str | None = None
    """With :attr:`interrupted`: the command that finishes the sweep (``aiblox sweep SPEC
    --resume``; its finished points are not redone)."""


class PointRow(_Strict):
    """One logged point (a child run of a sweep)."""

    sweep: str
    """Its sweep's name."""
    label: str
    """The point's label, in full."""
    config_hash: str
    """Its config hash, in full."""
    run_id: str
    """Its MLflow run id."""
    primary: str
    """The sweep's primary metric."""
    tune: float | None
    """Primary metric on the tune split."""
    report: float | None
    """Primary metric on the report split (None without one)."""
    baseline: bool
    """The sweep's named baseline."""
    best: bool
    """The sweep's chosen point."""


class RunRef(_Strict):
    """A resolved reference: one point's run."""

    run_id: str
    """MLflow run id."""
    sweep: str
    """Its sweep's name ("" for a run outside a sweep)."""
    label: str
    """Its label (tag ``aiblox.label``, else the run name)."""
    config_hash: str
    """Its config hash ("" when the run has none)."""

    @property
    def name(self) -> str:
        """``SWEEP:LABEL`` (or the label, or the run id)."""
        if self.sweep and self.label:
            return f"{self.sweep}:{self.label}"
        return self.label or self.run_id


class AmbiguousRun(ValueError):
    """A reference that matches several points (the message lists them)."""


def _experiments(client: Any) -> list[str]:
    return [e.experiment_id for e in client.search_experiments(max_results=50000)]


def _search(client: Any, exps: list[str], where: str,
            order_by: list[str] | None = None, deleted: bool = False) -> list[Any]:
    """Every page of the runs matching ``where`` (the deleted ones alone with ``deleted``)."""
    from mlflow.entities import ViewType

    view = ViewType.DELETED_ONLY if deleted else ViewType.ACTIVE_ONLY
    out: list[Any] = []
    token = None
    while exps:
        page = client.search_runs(exps, filter_string=where, order_by=order_by,
                                  max_results=1000, page_token=token, run_view_type=view)
        out.extend(page)
        token = page.token
        if not token:
            break
    return out


def _deleted_points(client: Any, exps: list[str], parent_id: str | None = None) -> list[Any]:
    """Point runs in MLflow's ``deleted`` stage (of one parent, or of every sweep)."""
    where = tag_filter(TAG_KIND, "point")
    if parent_id is not None:
        where += f" and {tag_filter(TAG_PARENT, parent_id)}"
    return _search(client, exps, where, deleted=True)


def _run_of(runs: list[Any], config_hash: str | None) -> str | None:
    """The lowest run id among ``runs`` of the point ``config_hash`` (None: none, or no hash)."""
    return min((r.info.run_id for r in runs
                if config_hash and r.data.tags.get(TAG_CONFIG) == config_hash), default=None)


def _with_deleted(row: SweepRow, deleted: list[Any]) -> SweepRow:
    """``row`` with its sweep's deleted points counted and its best point's marked."""
    mine = [r for r in deleted if r.data.tags.get(TAG_PARENT) == row.parent_run_id]
    return row.model_copy(update={"deleted": len(mine),
                                  "best_deleted_run_id": _run_of(mine, row.best_config_hash)})


def deleted_point_run(client: Any, parent: Any, config_hash: str) -> str | None:
    """The run id of the sweep's point ``config_hash`` when that run was deleted from the store
    (the lowest id of several), else None."""
    return _run_of(_deleted_points(client, [parent.info.experiment_id], parent.info.run_id),
                   config_hash)


def deleted_best_note(row: SweepRow) -> str:
    """One line saying that the sweep's best point's run was deleted, and how to restore it
    ("" when it was not)."""
    if row.best_deleted_run_id is None:
        return ""
    return (f"the best point of sweep {row.name!r}, {row.best_label} "
            f"({short_hash(row.best_config_hash or '')}), was deleted from the tracking store "
            f"(run {row.best_deleted_run_id}); `mlflow runs restore --run-id "
            f"{row.best_deleted_run_id}` brings it back")


def _sweep_row(parent: Any, points: int, tracking_uri: str | None = None) -> SweepRow:
    p, t, m = parent.data.params, parent.data.tags, parent.data.metrics
    primary = p.get("spec.primary", "")
    report = p.get("spec.report_split")
    key = primary.replace("@", "_at_")
    name = t.get("aiblox.sweep_name") or p.get("spec.name") or parent.info.run_name or ""
    interrupted = resume = None
    if parent.info.status == "RUNNING" and tracking_uri is not None:
        from aiblox.engine.tracking.owner import owner_status

        live, why = owner_status(t)
        if not live:  # killed (SIGKILL, a lost machine): MLflow still says RUNNING
            interrupted, resume = why, _resume_command(name, t, tracking_uri)
    return SweepRow(
        name=name, parent_run_id=parent.info.run_id, status=parent.info.status, points=points,
        primary=primary, tune_split=p.get("spec.tune_split", ""),
        report_split=None if report in (None, "None") else report,
        best_label=t.get("aiblox.best_label"), best_config_hash=t.get("aiblox.best_config_hash"),
        best_tune=m.get(f"best.tune.{key}"), best_report=m.get(f"best.report.{key}"),
        interrupted=interrupted, resume=resume)


def _resume_command(name: str, tags: dict[str, str], tracking_uri: str) -> str:
    """``aiblox sweep SPEC --resume`` for an interrupted sweep: the spec file it was run from
    (tagged on its parent run; ``evals/sweeps/<name>.toml`` for one logged before the tag),
    with the store, stage cache and device options it was run with and its tracking URI; a
    password they hold read from an environment variable (``--db "$AIBLOX_DB"``,
    :func:`~aiblox.engine.tracking.layout.rerun_command`)."""
    import shlex

    from aiblox.engine.tracking.layout import TAG_RERUN_OPTIONS, TAG_SPEC_PATH, rerun_command

    spec = tags.get(TAG_SPEC_PATH) or f"evals/sweeps/{name}.toml"
    return rerun_command(f"aiblox sweep {shlex.quote(spec)} --resume",
                         tags.get(TAG_RERUN_OPTIONS, ""), "--tracking-uri", tracking_uri)


def interrupted_note(row: SweepRow) -> str:
    """One line saying that a sweep MLflow shows as RUNNING was interrupted, and how to finish
    it ("" when it was not)."""
    if row.interrupted is None:
        return ""
    return (f"sweep {row.name!r} (parent run {row.parent_run_id}) was interrupted: "
            f"{row.interrupted}; `{row.resume}` finishes it (its finished points are kept)")


def list_sweeps(tracking_uri: str) -> list[SweepRow]:
    """Every sweep of the store, newest first (ties by run id). A missing local store raises
    :class:`~aiblox.engine.tracking.TrackingStoreError` (nothing is created)."""
    client = tracking_client(tracking_uri)
    exps = _experiments(client)
    parents = _search(client, exps, tag_filter(TAG_KIND, "sweep"))
    counts: dict[str, int] = {}
    for r in _search(client, exps, tag_filter(TAG_KIND, "point")):
        pid = r.data.tags.get(TAG_PARENT)
        if pid and r.info.status == "FINISHED":
            counts[pid] = counts.get(pid, 0) + 1
    parents.sort(key=lambda r: (-(r.info.start_time or 0), r.info.run_id))
    deleted = _deleted_points(client, exps) if parents else []
    return [_with_deleted(_sweep_row(r, counts.get(r.info.run_id, 0), tracking_uri), deleted)
            for r in parents]


def _children(client: Any, parent: Any) -> list[Any]:
    return [r for r in _search(client, [parent.info.experiment_id],
                               tag_filter(TAG_PARENT, parent.info.run_id))
            if r.info.status == "FINISHED" and r.data.tags.get(TAG_KIND) == "point"]


def _point_row(sweep: SweepRow, run: Any) -> PointRow:
    t, m = run.data.tags, run.data.metrics
    chash = t.get(TAG_CONFIG, "")
    return PointRow(
        sweep=sweep.name, label=t.get("aiblox.label") or run.info.run_name or run.info.run_id,
        config_hash=chash, run_id=run.info.run_id, primary=sweep.primary,
        tune=m.get(metric_key(sweep.tune_split, sweep.primary)),
        report=(m.get(metric_key(sweep.report_split, sweep.primary))
                if sweep.report_split else None),
        baseline=t.get("aiblox.baseline") == "true",
        best=bool(chash) and chash == sweep.best_config_hash)


def list_points(sweep: str, tracking_uri: str) -> tuple[SweepRow, list[PointRow]]:
    """One sweep (by name: its newest parent run; or by parent run id) and its points, best
    first on the tune split by the primary metric (ties by config hash, as the sweep ranks
    them; points without a tune value last)."""
    client = tracking_client(tracking_uri)
    parent = find_sweep_run(client, sweep)
    children = _children(client, parent)
    row = _with_deleted(_sweep_row(parent, len(children), tracking_uri),
                        _deleted_points(client, [parent.info.experiment_id], parent.info.run_id))
    points = [_point_row(row, c) for c in children]
    points.sort(key=lambda p: ranking_order(p.tune, p.config_hash, row.primary))
    return row, points


def _ref(run: Any, sweep: str = "") -> RunRef:
    t = run.data.tags
    return RunRef(run_id=run.info.run_id, sweep=sweep or t.get("aiblox.sweep_name", ""),
                  label=t.get("aiblox.label") or run.info.run_name or "",
                  config_hash=t.get(TAG_CONFIG, ""))


def _sweep_names(client: Any, runs: list[Any]) -> dict[str, str]:
    """Parent run id -> sweep name, for ``runs``' parents."""
    names: dict[str, str] = {}
    for r in runs:
        pid = r.data.tags.get(TAG_PARENT)
        if pid and pid not in names:
            try:
                names[pid] = _sweep_row(client.get_run(pid), 0).name
            except Exception:  # noqa: BLE001 - a parent gone: no name
                names[pid] = ""
    return names


def _one(ref: str, matches: list[RunRef], what: str,
         details: dict[str, str] | None = None) -> RunRef:
    """The one match, else :class:`AmbiguousRun` listing the first ten as ``SWEEP:LABEL
    (DETAILS, run ID)``: ``details`` by run id (:func:`_details`), else its config hash."""
    if len(matches) == 1:
        return matches[0]
    details = details or {}
    listed = "; ".join(f"{m.name} ({details.get(m.run_id, short_hash(m.config_hash))}, run "
                       f"{m.run_id})" for m in matches[:10])
    more = f"; and {len(matches) - 10} more" if len(matches) > 10 else ""
    raise AmbiguousRun(f"{ref!r} is ambiguous: {len(matches)} points match its {what}: "
                       f"{listed}{more}")


def _in_sweep(client: Any, ref: str, sweep: str, key: str) -> RunRef:
    try:
        parent = find_sweep_run(client, sweep)
    except ValueError:
        raise ValueError(f"{ref!r}: no sweep named {sweep!r} (aiblox runs lists them)") from None
    row = _sweep_row(parent, 0)
    children = _children(client, parent)
    refs = [_ref(c, row.name) for c in children]
    refs.sort(key=lambda r: (r.label, r.config_hash))
    exact = [r for r in refs if r.label == key]
    if exact:
        return _one(ref, exact, "label")
    prefix = [r for r in refs if r.label.startswith(key)]
    if prefix:
        return _one(ref, prefix, "label prefix")
    if key == "best":  # no label is "best": the sweep's best point
        return _sweep_best(client, parent, children)
    if key == "baseline":
        base = [_ref(c, row.name) for c in children
                if c.data.tags.get("aiblox.baseline") == "true"]
        if not base:
            raise ValueError(f"{ref!r}: sweep {row.name} has no baseline point (its spec "
                             f"names none)")
        return _one(ref, base, "baseline")
    if _HEX.match(key.lower()):
        by_hash = [r for r in refs if r.config_hash.startswith(key.lower())]
        if by_hash:
            return _one(ref, by_hash, "config-hash prefix")
    # the labels nearest the one typed first (a typo's intended label among 1,000 points),
    # then the rest in order
    labels = [r.label for r in refs]
    near = difflib.get_close_matches(key, labels, n=8, cutoff=0.6)
    ordered = near + [x for x in labels if x not in near]
    shown = (("nearest " if near else "") + ", ".join(ordered[:8])
             + (f", ... ({len(labels)} in all)" if len(labels) > 8 else ""))
    raise ValueError(f"{ref!r}: sweep {row.name} has no point labelled {key!r} (nor a label "
                     f"or config hash starting with it; {row.name}:best and {row.name}:baseline "
                     f"name its best point and baseline); its points: {shown or 'none'}")


_RUN_HASH_TAGS = (f"{TAG_RUN_HASH}.", f"{TAG_TREC_HASH}.")


def _run_hashes(run: Any, prefix: str = "") -> dict[str, str]:
    """The run hashes a logged run carries (``{tag: hash}``: its manifest's per split, and the
    ``run`` hash ``aiblox eval`` printed), those starting with ``prefix``."""
    return {k: v for k, v in run.data.tags.items()
            if k.startswith(_RUN_HASH_TAGS) and v.startswith(prefix)}


def _splits(run: Any) -> tuple[str, ...]:
    """The splits a logged run carries a run hash of, sorted."""
    return tuple(sorted({k.split(".", 2)[2] for k in _run_hashes(run)}))


def _same_point(run: Any, sweep: str) -> tuple[str, ...]:
    """What makes two logged runs one point: its sweep, config hash, dataset hash and splits
    (``aiblox eval --mlflow`` run twice logs one point twice)."""
    t = run.data.tags
    return (sweep, t.get(TAG_CONFIG, ""), t.get(TAG_DATASET, ""), *_splits(run))


def _details(client: Any, runs: list[Any]) -> dict[str, str]:
    """Run id -> what tells the runs of several points apart in an ambiguity's listing: a
    point's config hash, or for a scored run file (no config) the file's sha256 and the
    dataset it was scored on; then the dataset (name and hash, as ``aiblox eval`` prints it)
    when the runs' datasets differ, and the splits when theirs do. The same file scored on
    two datasets is two points whose config hashes are alike (none)."""
    datasets = {r.data.tags.get(TAG_DATASET, "") for r in runs}
    splits = {_splits(r) for r in runs}
    out: dict[str, str] = {}
    for r in runs:
        t, params = r.data.tags, r.data.params
        parts = []
        if t.get(TAG_CONFIG):
            parts.append(short_hash(t[TAG_CONFIG]))
        elif params.get("run_file_sha256"):
            parts.append(f"file {short_hash(params['run_file_sha256'])}")
        digest = t.get(TAG_DATASET, "")
        if digest and (len(datasets) > 1 or not t.get(TAG_CONFIG)):
            name = read_dataset_name(client, r)
            parts.append(f"dataset {name + ' ' if name else ''}{short_hash(digest)}")
        if len(splits) > 1:
            parts.append(f"split {', '.join(_splits(r)) or 'none'}")
        out[r.info.run_id] = ", ".join(parts)
    return out


def _matches(client: Any, ref: str, runs: list[Any], what: str,
             key: Callable[[Any], tuple[str, ...]] = lambda r: ()) -> RunRef:
    """The one point ``runs`` (matching ``ref``'s ``what``) are: the runs of one point (as
    :func:`_same_point` and ``key`` say) count once, as its latest finished run (ties by run
    id); several points raise :class:`AmbiguousRun`."""
    names = _sweep_names(client, runs)
    latest: dict[tuple[Any, ...], tuple[Any, str]] = {}
    for r in runs:
        sweep = names.get(r.data.tags.get(TAG_PARENT, ""), "")
        point = (*_same_point(r, sweep), *key(r))
        seen = latest.get(point)
        if seen is None or ((r.info.end_time or 0, r.info.run_id)
                            > (seen[0].info.end_time or 0, seen[0].info.run_id)):
            latest[point] = (r, sweep)
    refs = sorted((_ref(r, sweep) for r, sweep in latest.values()),
                  key=lambda r: (r.sweep, r.label, r.run_id))
    if len(refs) == 1:
        return refs[0]
    by_id = {r.info.run_id: r for r, _ in latest.values()}
    return _one(ref, refs, what, _details(client, [by_id[m.run_id] for m in refs[:10]]))


def _by_hash_prefix(client: Any, ref: str, deleted: bool = False) -> RunRef | None:
    """The finished point whose config hash starts with ``ref`` (``deleted``: among the
    runs deleted from the store only)."""
    prefix = ref.lower()
    runs = [r for r in _search(client, _experiments(client),
                               f"{tag_filter(TAG_KIND, 'point')} and "
                               f"tags.`{TAG_CONFIG}` LIKE '{prefix}%'", deleted=deleted)
            if r.info.status == "FINISHED"]
    if not runs:
        return None
    return _matches(client, ref, runs, "config-hash prefix")


def _by_run_hash_prefix(client: Any, ref: str) -> RunRef | None:
    """The run whose run hash (either kind, :func:`_run_hashes`) starts with ``ref``: every
    finished point and scored run file is read (a run hash's tag names its split, which a
    search cannot leave open), so this is tried after the config hashes."""
    prefix = ref.lower()
    exps = _experiments(client)
    runs = [r for kind in ("point", "run")
            for r in _search(client, exps, tag_filter(TAG_KIND, kind))
            if r.info.status == "FINISHED" and _run_hashes(r, prefix)]
    if not runs:
        return None
    return _matches(client, ref, runs, "run-hash prefix",
                    key=lambda r: tuple(sorted(_run_hashes(r, prefix).values())))


def _deleted_note(run: Any, ref: str) -> str:
    """One line: the run ``ref`` names was deleted from the tracking store, and how to
    restore it."""
    what = "sweep" if run.data.tags.get(TAG_KIND) == "sweep" else "point"
    label = run.data.tags.get("aiblox.label") or run.info.run_name or ""
    return (f"{ref!r} names a {what} run deleted from the tracking store ({label}, run "
            f"{run.info.run_id}); `mlflow runs restore --run-id {run.info.run_id}` brings it "
            f"back")


def _sweep_best(client: Any, parent: Any, children: list[Any] | None = None) -> RunRef:
    """The sweep's best point (``children``: its point runs, when the caller has them)."""
    row = _sweep_row(parent, 0)
    if not row.best_config_hash:
        raise ValueError(f"sweep {row.name!r} has no best point logged (unfinished?)")
    children = _children(client, parent) if children is None else children
    found = [c for c in children if c.data.tags.get(TAG_CONFIG) == row.best_config_hash]
    if not found:
        row = row.model_copy(update={"best_deleted_run_id": deleted_point_run(
            client, parent, row.best_config_hash)})
        if row.best_deleted_run_id:
            raise ValueError(deleted_best_note(row) + "; or name another point")
        raise ValueError(f"sweep {row.name!r}: the best point "
                         f"{short_hash(row.best_config_hash or '')} has no child run")
    return _ref(found[0], row.name)


def resolve_run(ref: str, tracking_uri: str, *, sweep_best: bool = False) -> RunRef:
    """The point run ``ref`` names (see the module doc for the forms, in the order tried).
    With ``sweep_best``, a sweep name or parent run id is its best point. Raises
    :class:`AmbiguousRun` listing the candidates, ``ValueError`` when nothing matches, and
    :class:`~aiblox.engine.tracking.TrackingStoreError` for a missing local store."""
    ref = ref.strip()
    if not ref:
        raise ValueError("empty run reference: give a run id, SWEEP:LABEL or a config-hash "
                         "prefix")
    client = tracking_client(tracking_uri)
    if _RUN_ID.match(ref):
        try:
            run = client.get_run(ref)
        except Exception:  # noqa: BLE001 - not a run here: maybe a config-hash prefix
            run = None
        if run is not None:
            if run.info.lifecycle_stage == "deleted":  # get_run finds it all the same
                raise ValueError(_deleted_note(run, ref))
            if run.data.tags.get(TAG_KIND) == "sweep":
                if sweep_best:
                    return _sweep_best(client, run)
                raise ValueError(f"run {ref} is a sweep (a parent run), not a point: name one "
                                 f"of its points (aiblox runs {ref})")
            sweep = ""
            if run.data.tags.get(TAG_PARENT):
                sweep = _sweep_names(client, [run]).get(run.data.tags[TAG_PARENT], "")
            return _ref(run, sweep)
    if ":" in ref:
        sweep, _, key = ref.partition(":")
        if sweep and key:
            return _in_sweep(client, ref, sweep, key)
    if sweep_best:
        try:
            parent = find_sweep_run(client, ref)
        except ValueError:
            parent = None
        if parent is not None:
            return _sweep_best(client, parent)
    if _HEX.match(ref.lower()) and len(ref) >= MIN_HASH_PREFIX:
        found = _by_hash_prefix(client, ref) or _by_run_hash_prefix(client, ref)
        if found is not None:
            return found
        try:
            gone = _by_hash_prefix(client, ref, deleted=True)
        except AmbiguousRun as exc:
            raise ValueError(f"only points deleted from the tracking store match: {exc}") from None
        if gone is not None:  # only a deleted run matches: say so, not "no point"
            raise ValueError(_deleted_note(client.get_run(gone.run_id), ref))
    what = (f"no sweep run with id or name {ref!r}, and no point" if sweep_best
            else f"no point {ref!r} in {tracking_uri}")
    raise ValueError(
        f"{what}: give a 32-hex MLflow run id, SWEEP:LABEL (a label or its unique prefix), or "
        f"a config-hash or run-hash prefix of {MIN_HASH_PREFIX}+ hex digits"
        + (", or a sweep name" if sweep_best else "") + " (aiblox runs lists them)")
