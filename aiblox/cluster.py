"""A Ray cluster, for the sweep's points and the ingest's embeddings (``--executor ray``): the
executors, a bad ``--executor`` or ``--address`` refused before any work, this process attached
(:func:`connect`) and the retries of a task whose worker died. Ray is imported on first use
only (``pip install 'aiblox[distributed]'``)."""

from __future__ import annotations

import socket
from typing import Any

__all__ = [
    "EXECUTORS",
    "ExecutorError",
    "MAX_RETRIES",
    "check_address",
    "check_executor",
    "connect",
]


EXECUTORS = ("local", "ray")
"""Where a sweep's points run: in this process, or as tasks on a Ray cluster."""


MAX_RETRIES = 3
"""Times Ray runs a task again whose worker process (or node) died under it."""


CONNECT_TIMEOUT_S = 3.0
"""How long the reachability check of ``--address`` waits for the cluster's GCS port."""


class ExecutorError(ValueError):
    """A bad ``--executor`` or ``--address`` (checked before any work); one line."""


def check_address(address: str, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """``ExecutorError`` naming ``address`` unless a Ray cluster answers there within
    ``timeout`` seconds: ``HOST:PORT`` is asked for its cluster id (the GCS's own gRPC call, so
    a port where something else listens fails too), ``ray://HOST:PORT`` (Ray Client) must
    accept a connection; ``auto`` is left to Ray. ``ray.init`` on an address where no cluster
    answers retries for a long time: this answers first."""
    if address == "auto":
        return
    client = address.startswith("ray://")
    hostport = address.removeprefix("ray://").rstrip("/")
    host, sep, port = hostport.rpartition(":")
    if not sep or not host or not port.isdigit() or "://" in hostport:
        raise ExecutorError(f"--address {address!r}: expected HOST:PORT (the head node's GCS "
                            f"address, as `ray start --head` prints it), ray://HOST:PORT or auto")
    reason = _client_reason(host, int(port), timeout) if client else _gcs_reason(hostport,
                                                                                 timeout)
    if reason is not None:
        raise ExecutorError(f"--address {address}: no Ray cluster answers there ({reason}); "
                            f"start one with `ray start --head` or pass its address")


def _client_reason(host: str, port: int, timeout: float) -> str | None:
    try:
        with socket.create_connection((host.strip("[]"), port), timeout=timeout):
            return None
    except OSError as exc:
        return "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))


def _gcs_reason(hostport: str, timeout: float) -> str | None:
    import grpc
    from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc

    channel = grpc.insecure_channel(hostport)
    try:
        request: Any = gcs_service_pb2.GetClusterIdRequest()  # type: ignore[attr-defined]
        gcs_service_pb2_grpc.NodeInfoGcsServiceStub(channel).GetClusterId(request,
                                                                          timeout=timeout)
    except grpc.RpcError as exc:
        code = exc.code()
        return ("timed out" if code == grpc.StatusCode.DEADLINE_EXCEEDED
                else "nothing listens" if code == grpc.StatusCode.UNAVAILABLE
                else f"not a Ray GCS: {code.name.lower()}")
    finally:
        channel.close()
    return None


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
    second sweep in this process does not pay the connection again."""
    import logging

    import ray

    if not ray.is_initialized():
        ray.init(address=address or None, log_to_driver=False, logging_level=logging.WARNING,
                 include_dashboard=None if address else False)
    return max(1, int(ray.cluster_resources().get("CPU", 1)))
