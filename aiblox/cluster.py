"""A Ray cluster, for the sweep's points and the ingest's embeddings (``--executor ray``): the
executors, a bad ``--executor`` or ``--address`` refused before any work, this process attached
(:func:`connect`) and the retries of a task whose worker died. Ray is imported on first use
only (``pip install 'aiblox[distributed]'``)."""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterator, Sequence
from typing import Any

__all__ = [
    "EXECUTORS",
    "ClusterLost",
    "ExecutorError",
    "MAX_RETRIES",
    "check_address",
    "check_executor",
    "completed",
    "connect",
    "gcs_address",
]


EXECUTORS = ("local", "ray")
"""Where a sweep's points run: in this process, or as tasks on a Ray cluster."""


MAX_RETRIES = 3
"""Times Ray runs a task again whose worker process (or node) died under it."""


AUTH_MODE_VAR = "RAY_AUTH_MODE"
"""Ray's switch for token authentication (``token`` or ``disabled``)."""


CONNECT_TIMEOUT_S = 3.0
"""How long the reachability check of ``--address`` waits for the cluster's GCS port."""


WAIT_S = 5.0
"""How long the driver waits for its tasks before it checks that the cluster is still there."""

LOST_AFTER = 3
"""Checks in a row that find no cluster (nothing listens, or no answer) before it counts as
gone: found within 15 to 25 seconds, before Ray's own core ends this process (60 seconds
without the cluster's GCS, with no message of aiblox's)."""

ABANDON_S = 3.0
"""How long the tasks still pending when one failed are given to end once cancelled."""


class ExecutorError(ValueError):
    """A bad ``--executor`` or ``--address`` (checked before any work); one line."""


class ClusterLost(ExecutorError):
    """The Ray cluster stopped answering while this process waited for its tasks; one line
    saying what to do."""


def check_address(address: str, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """``ExecutorError`` naming ``address`` unless a Ray cluster answers there within
    ``timeout`` seconds: ``HOST:PORT`` is asked for its cluster id (the GCS's own gRPC call, so
    a port where something else listens fails too), ``ray://HOST:PORT`` (Ray Client) must
    accept a connection; ``auto`` is left to Ray. ``ray.init`` on an address where no cluster
    answers retries for a long time: this answers first.

    A cluster with token authentication (Ray 2.60 turns it on wherever a token exists) is
    asked again with the token Ray itself would send (:func:`_authenticate`); once it is
    accepted, this process sends it to the cluster (``RAY_AUTH_MODE=token``, as
    ``ray.init(address="auto")`` does), and without one the error says how to supply it."""
    if address == "auto":
        return
    client = address.startswith("ray://")
    hostport = address.removeprefix("ray://")  # HOST:PORT/ too is refused (ray.init is)
    host, sep, port = hostport.rpartition(":")
    if not sep or not host or not port.isdigit() or "://" in hostport:
        raise ExecutorError(f"--address {address!r}: expected HOST:PORT (the head node's GCS "
                            f"address, as `ray start --head` prints it), ray://HOST:PORT or auto")
    if client:
        _no_cluster(address, _client_reason(host, int(port), timeout))
        return
    import grpc

    code = _cluster_id(hostport, timeout)
    if code == grpc.StatusCode.UNAUTHENTICATED:
        _authenticate(address, hostport, timeout)
    else:
        _no_cluster(address, _reason(code))


def _no_cluster(address: str, reason: str | None) -> None:
    if reason is not None:
        raise ExecutorError(f"--address {address}: no Ray cluster answers there ({reason}); "
                            f"start one with `ray start --head` or pass its address")


def _client_reason(host: str, port: int, timeout: float) -> str | None:
    try:
        with socket.create_connection((host.strip("[]"), port), timeout=timeout):
            return None
    except OSError as exc:
        return "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))


def _cluster_id(hostport: str, timeout: float, metadata: tuple[tuple[str, str], ...] = ()
                ) -> Any:
    """The status of the GCS's ``GetClusterId`` at ``hostport`` (a ``grpc.StatusCode``), None
    when it answered."""
    import grpc
    from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc

    channel = grpc.insecure_channel(hostport)
    try:
        request: Any = gcs_service_pb2.GetClusterIdRequest()
        gcs_service_pb2_grpc.NodeInfoGcsServiceStub(channel).GetClusterId(
            request, timeout=timeout, metadata=metadata or None)
    except grpc.RpcError as exc:
        return exc.code()
    finally:
        channel.close()
    return None


def _reason(code: Any) -> str | None:
    import grpc

    return (None if code is None else "timed out" if code == grpc.StatusCode.DEADLINE_EXCEEDED
            else "nothing listens" if code == grpc.StatusCode.UNAVAILABLE
            else f"not a Ray GCS: {code.name.lower()}")


AUTH_HELP = ("put the cluster's token (`ray get-auth-token` on its head node prints it) in "
             "~/.ray/auth_token, or set RAY_AUTH_TOKEN (or RAY_AUTH_TOKEN_PATH, a file)")
"""How to supply a Ray cluster's authentication token: where Ray looks for it."""


def _authenticate(address: str, hostport: str, timeout: float) -> None:
    """The cluster at ``hostport`` wants Ray's token authentication: the token found where Ray
    finds it (``RAY_AUTH_TOKEN``, ``RAY_AUTH_TOKEN_PATH``, ``~/.ray/auth_token``) is sent, and
    once the cluster accepts it this process is set to send it (``RAY_AUTH_MODE=token``:
    ``ray.init`` with an explicit address sends no token otherwise). ``ExecutorError`` when no
    token is found, the cluster refuses it, or ``RAY_AUTH_MODE`` turns tokens off."""
    import grpc
    from ray._raylet import (  # type: ignore[attr-defined]
        AuthenticationTokenLoader,
        Config,
    )

    loader = AuthenticationTokenLoader.instance()
    loader.reset_cache()  # the token the environment names now (the loader keeps its first)
    header = loader.get_token_for_http_header(ignore_auth_mode=True)
    if not header:
        raise ExecutorError(f"--address {address}: the Ray cluster there needs an "
                            f"authentication token and none was found: {AUTH_HELP}")
    code = _cluster_id(hostport, timeout, tuple(header.items()))
    if code == grpc.StatusCode.UNAUTHENTICATED:
        raise ExecutorError(f"--address {address}: the Ray cluster there refused this "
                            f"machine's authentication token; {AUTH_HELP}")
    _no_cluster(address, _reason(code))
    mode = os.environ.get(AUTH_MODE_VAR)
    if mode is None:
        os.environ[AUTH_MODE_VAR] = "token"  # Ray workers and ray.init read it
        Config.initialize("")  # the mode as Ray's C++ core sees it, read again
    elif mode.lower() != "token":
        raise ExecutorError(f"--address {address}: the Ray cluster there needs token "
                            f"authentication but {AUTH_MODE_VAR}={mode}; set "
                            f"{AUTH_MODE_VAR}=token or unset it")


def check_executor(executor: str, address: str | None = None) -> None:
    """The executor and address checked before anything is opened or scheduled: a known
    executor, ``address`` only with ``ray``, Ray importable, the address reachable."""
    if executor not in EXECUTORS:
        raise ExecutorError(f"--executor {executor!r}: choose one of {', '.join(EXECUTORS)}")
    if executor != "ray":
        if address:
            raise ExecutorError(f"--address {address} needs --executor ray")
        return
    try:
        import ray  # noqa: F401
    except ImportError:
        raise ExecutorError("--executor ray needs Ray: pip install 'aiblox[distributed]'"
                            ) from None
    if address:
        check_address(address)


def connect(address: str | None = None) -> int:
    """This process attached to the Ray cluster at ``address`` (None: one already attached, or
    a local Ray instance started now); the cluster's CPU count. Left attached afterwards, so a
    second sweep in this process does not pay the connection again; attached elsewhere, it is
    detached first (an ``address`` naming another cluster is never ignored). ``address`` is
    checked first (:func:`check_address`: one clear error, the cluster's token sent where it
    wants one)."""
    import logging

    import ray

    if ray.is_initialized() and address and not _attached_to(address):
        check_address(address)  # before this process lets go of the cluster it has
        ray.shutdown()
    if not ray.is_initialized():
        if address:
            check_address(address)
        ray.init(address=address or None, log_to_driver=False, logging_level=logging.WARNING,
                 include_dashboard=None if address else False)
        _ATTACHED[0] = address or ""
    return max(1, int(ray.cluster_resources().get("CPU", 1)))


_ATTACHED: list[str | None] = [None]
"""The ``address`` this process last attached with (None: it never did; ``""``: none given)."""


def _attached_to(address: str) -> bool:
    """Whether this process (attached) is on the cluster ``address`` names: ``auto`` or the
    address it attached with, or the cluster's GCS at the same host (resolved) and port."""
    if address in ("auto", _ATTACHED[0]):
        return True
    if address.startswith("ray://"):
        return False  # another Ray Client server than the one attached with
    gcs = gcs_address()
    return gcs is not None and _endpoint(gcs) == _endpoint(address)


def _endpoint(hostport: str) -> tuple[str, str]:
    host, _, port = hostport.rstrip("/").rpartition(":")
    host = host.strip("[]")
    with contextlib.suppress(OSError, IndexError):  # unresolvable: compared as written
        host = str(socket.getaddrinfo(host, None)[0][4][0])
    return str(host), port


def gcs_address() -> str | None:
    """``HOST:PORT`` of the GCS of the cluster this process is attached to (None: not
    attached, or attached through Ray Client)."""
    import ray

    try:
        return ray.get_runtime_context().gcs_address or None
    except Exception:  # noqa: BLE001 - not attached, or a Ray Client session
        return None


def completed(refs: Sequence[Any], again: str) -> Iterator[tuple[Any, Any]]:
    """``(ref, its value)`` for the Ray tasks ``refs``, each as it finishes. Every
    :data:`WAIT_S` seconds without one, the cluster's GCS is asked whether it is still there;
    gone (:data:`LOST_AFTER` checks in a row), :class:`ClusterLost` says so, and that
    ``again`` (the command run again) goes on, with this process detached from it (Ray's core
    would end the process a minute later). When a task fails (its error raised here) or the
    caller stops early, the tasks still pending are cancelled and their errors taken, so that
    Ray does not print each one as unhandled after the caller's own error."""
    import ray

    pending = list(refs)
    gcs = gcs_address()
    misses = 0
    try:
        while pending:
            try:
                ready, pending = ray.wait(pending, num_returns=1, timeout=WAIT_S)
            except ConnectionError:  # a Ray Client session whose server is gone
                misses, ready = LOST_AFTER, []
            if ready:
                misses = 0
                for ref in ready:
                    yield ref, _value(ref)
                continue
            if gcs is not None and _gone(gcs):
                misses += 1
            if misses >= LOST_AFTER:
                pending = []  # nothing left to cancel: the cluster is gone
                ray.shutdown()
                raise ClusterLost(f"the Ray cluster at {gcs or 'the address given'} stopped "
                                  f"answering while its tasks ran (stopped or crashed); start "
                                  f"it again, then {again}")
    finally:
        if pending:
            _abandon(pending)


def _value(ref: Any) -> Any:
    """A task's value; its failure raised as the task's own exception (its message, not the
    worker's traceback around it: a stage's refusal reads as it does locally)."""
    import ray

    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as exc:
        cause = getattr(exc, "cause", None)
        if isinstance(cause, Exception):
            raise cause from exc
        raise


def _gone(gcs: str) -> bool:
    """Whether nothing answers at the GCS address ``gcs`` (a refusal, e.g. for want of a
    token, is an answer)."""
    import grpc

    return _cluster_id(gcs, CONNECT_TIMEOUT_S) in (grpc.StatusCode.UNAVAILABLE,
                                                   grpc.StatusCode.DEADLINE_EXCEEDED)


def _abandon(refs: list[Any]) -> None:
    """Tasks no one will wait for: cancelled, and the errors of those that end within
    :data:`ABANDON_S` seconds taken (an error never taken is printed when its ref goes)."""
    import ray

    for ref in refs:
        with contextlib.suppress(Exception):
            ray.cancel(ref)
    with contextlib.suppress(Exception):
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=ABANDON_S)
        for ref in ready:
            with contextlib.suppress(Exception):
                ray.get(ref)
