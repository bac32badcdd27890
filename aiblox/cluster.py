"""A Ray cluster, for the sweep's points and the ingest's embeddings (``--executor ray``): the
executors, a bad ``--executor`` or ``--address`` refused before any work, this process attached
(:func:`connect`) and the retries of a task whose worker died. Ray is imported on first use
only (``pip install 'aiblox[distributed]'``)."""

from __future__ import annotations

import os
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


AUTH_MODE_VAR = "RAY_AUTH_MODE"
"""Ray's switch for token authentication (``token`` or ``disabled``)."""


CONNECT_TIMEOUT_S = 3.0
"""How long the reachability check of ``--address`` waits for the cluster's GCS port."""


class ExecutorError(ValueError):
    """A bad ``--executor`` or ``--address`` (checked before any work); one line."""


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
    hostport = address.removeprefix("ray://").rstrip("/")
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
    second sweep in this process does not pay the connection again. ``address`` is checked
    first (:func:`check_address`: one clear error, the cluster's token sent where it wants
    one)."""
    import logging

    import ray

    if not ray.is_initialized():
        if address:
            check_address(address)
        ray.init(address=address or None, log_to_driver=False, logging_level=logging.WARNING,
                 include_dashboard=None if address else False)
    return max(1, int(ray.cluster_resources().get("CPU", 1)))
