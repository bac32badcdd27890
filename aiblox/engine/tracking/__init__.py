"""MLflow logging of sweeps: one parent run per sweep, one child run per point.

The parent run is found by the sweep's hash (tag ``aiblox.sweep_hash``) and the hash of the data
it scores (tag ``aiblox.dataset_hash``, when the tracker is given it, as ``aiblox sweep`` does:
the same spec over changed data is a new parent, never the old data's resumed), so running the
same spec on the same data again logs nothing twice: a child is logged only when no FINISHED
child of the parent carries the point's config hash (tag ``aiblox.config_hash``).

One writer per sweep. A process writing a parent run owns it: tag ``aiblox.owner`` names the
host (with its boot id and pid namespace), the pid (and the process's start time) and a random
token, and tag
``aiblox.heartbeat`` holds a timestamp that a background thread renews every
:data:`HEARTBEAT_S` seconds while the sweep runs. An unfinished parent is live when its owner
is: on the same machine, when that process still runs (a definite answer, whatever the
heartbeat says); from another machine, when its heartbeat is younger than the lease
(:data:`LEASE_S`, ``AIBLOX_SWEEP_LEASE_S``). A second process on a live sweep is refused
(:class:`SweepBusy`), ``resume`` or not; an unfinished parent whose owner is gone is adopted
only with ``resume=True`` (else :class:`SweepInterrupted`). Adopting it deletes its children
that never finished (terminated ``KILLED`` first, so no run stays ``RUNNING``) and the repeats
of a config hash, so every point is logged exactly once, and the parent ends ``FINISHED``. A
sweep that raises in this process (Ctrl-C, an error) gives its parent up at once (status
``KILLED`` or ``FAILED``), see :func:`release_on_error`.

Creating and adopting a parent happen under an inter-process file lock for a local store
(``sqlite:///PATH``: ``PATH.lock``; a file store: ``.aiblox.lock`` in its folder), which also
covers MLflow's first use of the store (schema creation) and the experiment's creation, so
sweeps started together on a fresh store neither race nor duplicate. A remote tracking server
has no such lock: a claim is written, then read back after :data:`SETTLE_S` seconds, and the
earliest parent (or the last claim) wins. :func:`tracking_client` opens a store; read-only
callers pass ``create=False`` and a missing ``sqlite:///`` file is an error, not a new empty
database. Values put into MLflow filter strings go through :func:`tag_filter`, which refuses
anything but a plain name.

Children: params are the flattened config, the settings that apply to the point only
(:func:`logged_params`); metrics ``<split>.<metric>`` (``@`` written ``_at_``, which MLflow names
cannot hold); tags hold the hashes; artifacts hold ``manifest.json`` and one per-query metrics
parquet per split (every stage with per-query values: ranx metrics, and for pipeline points
chunk and answer metrics), for selection points ``evidence.<split>.parquet`` (``query_id, rank,
chunk_id, item_id``), and for the points the conclusion names one TREC run file per split (any
other point's is written from the stage cache: :func:`logged_runs`). In file names a derived
split is written by :func:`split_file` (``test:0/2`` as ``test-0of2``). Points are written in
batches, one transaction each into a SQL store (:mod:`aiblox.engine.tracking.writer`). mlflow
(and filelock, which it brings) is imported in this package only (the ``tracking`` extra).

================  ============================================================================
module            what it is for
================  ============================================================================
``mlflow_store``  the store: URIs, its file lock, a client opened once, filter values
``owner``         the process owning a parent run, its heartbeat, a sweep given up on an error
``layout``        a point's tags, params, metric names, artifact files (:func:`point_record`);
                  the parent's summary
``writer``        the one writer: :class:`SweepTracker` (a sweep, its points in batches),
                  :func:`log_runs` (``aiblox eval --mlflow``, the notebooks)
``reader``        the one reader: artifacts, manifests, per-query values, a sweep's points,
                  a point's run files written again from the stage cache
================  ============================================================================
"""

from aiblox.engine.tracking.layout import (
    MANIFEST,
    PointLog,
    cv_metrics,
    cv_summary,
    cv_tags,
    flatten,
    logged_params,
    metric_key,
    pareto_summary,
    per_query_file,
    point_record,
    run_file,
    split_file,
    trec_run,
)
from aiblox.engine.tracking.mlflow_store import (
    DEFAULT_TRACKING_URI,
    HEARTBEAT_S,
    LEASE_S,
    SETTLE_S,
    TrackingStoreError,
    artifact_location,
    check_tracking_server,
    check_tracking_store,
    new_tracking_files,
    opened_uri,
    quiet_downloads,
    remove_made_store,
    tag_filter,
    tracking_client,
)
from aiblox.engine.tracking.owner import SweepBusy, SweepInterrupted, release_on_error
from aiblox.engine.tracking.reader import (
    artifact_bytes,
    child_runs,
    find_sweep_run,
    logged_runs,
    logged_splits,
    point_manifest,
    read_dataset_name,
    read_evidence,
    read_json,
    read_manifest,
    read_per_query,
    scored_run_files,
)
from aiblox.engine.tracking.writer import SweepTracker, log_runs

__all__ = [
    "DEFAULT_TRACKING_URI",
    "HEARTBEAT_S",
    "LEASE_S",
    "MANIFEST",
    "PointLog",
    "SETTLE_S",
    "SweepBusy",
    "SweepInterrupted",
    "SweepTracker",
    "TrackingStoreError",
    "artifact_bytes",
    "artifact_location",
    "check_tracking_server",
    "check_tracking_store",
    "child_runs",
    "cv_metrics",
    "cv_summary",
    "cv_tags",
    "find_sweep_run",
    "flatten",
    "log_runs",
    "logged_params",
    "logged_runs",
    "logged_splits",
    "metric_key",
    "new_tracking_files",
    "opened_uri",
    "pareto_summary",
    "per_query_file",
    "point_manifest",
    "point_record",
    "quiet_downloads",
    "read_dataset_name",
    "read_evidence",
    "read_json",
    "read_manifest",
    "read_per_query",
    "release_on_error",
    "remove_made_store",
    "run_file",
    "scored_run_files",
    "split_file",
    "tag_filter",
    "tracking_client",
    "trec_run",
]
