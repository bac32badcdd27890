"""Where a model runs: ``--device auto|cpu|cuda[:N]`` (and ``mps`` on a Mac), resolved once.

``auto`` (the default everywhere) is ``cuda:0`` when torch sees a GPU, else ``cpu``; it never
picks ``mps``, which must be asked for. ``cuda`` is ``cuda:0``; ``cuda:N`` must name a GPU
torch sees. A GPU asked for and not there is a :class:`DeviceError` whose one line names the
option (``--device``, or a spec's ``device``) before any work.

One model gives other last bits on another device, so a model id carries the device class it
embeds on (:func:`with_device`): ``all-MiniLM-L6-v2`` on the CPU (every key made before devices
existed stays as it was), ``all-MiniLM-L6-v2+cuda`` on a GPU, keyed apart in the embedding
cache, the signals stage and the config hashes. The class, not the index: ``cuda:0`` and
``cuda:1`` give the same bits.

Resolving ``auto`` on a machine without an NVIDIA (or AMD, or WSL) GPU driver does not import
torch (a second and more): the driver's device files are looked for first.
"""

from __future__ import annotations

import os
import re
import sys
from typing import Any

__all__ = ["DEVICE_HELP", "DeviceError", "describe_device", "device_class", "embedder_device",
           "gpu_count", "parse_device", "resolve_device", "split_device", "with_device"]

DEVICE_HELP = ("Where models run: auto (the first GPU torch sees, else the CPU), cpu, cuda, "
               "cuda:N or mps.")

_SPEC = re.compile(r"^(auto|cpu|mps|cuda(?::(\d+))?)$")
_DRIVER_FILES = ("/dev/nvidiactl", "/dev/nvidia0", "/proc/driver/nvidia", "/dev/dxg", "/dev/kfd")
"""A GPU driver's device files (NVIDIA, WSL, AMD ROCm): without any, torch sees no GPU."""
_SUFFIX = "+"


class DeviceError(ValueError):
    """A device that cannot be used (malformed, or a GPU torch does not see); one line that
    names the option."""


def parse_device(spec: str, option: str = "--device") -> str:
    """``spec`` checked for form (``auto``, ``cpu``, ``cuda``, ``cuda:N``, ``mps``) and
    returned lower-cased; nothing is imported. :class:`DeviceError` naming ``option``."""
    text = str(spec).strip().lower()
    if not _SPEC.match(text):
        raise DeviceError(f"{option} {spec!r}: not a device; use auto, cpu, cuda, cuda:N "
                          f"(N a GPU index: 0, 1, ...) or mps")
    return text


def _torch(option: str, spec: str) -> Any:
    try:
        import torch
    except ImportError:
        raise DeviceError(f"{option} {spec}: needs torch: pip install 'aiblox[embeddings]'"
                          ) from None
    return torch


def gpu_count() -> int:
    """CUDA GPUs torch sees (0 without torch, or without a GPU driver: then torch is not
    imported)."""
    if "torch" not in sys.modules and not any(os.path.exists(p) for p in _DRIVER_FILES):
        return 0
    try:
        import torch
    except ImportError:
        return 0
    return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0


def resolve_device(spec: str = "auto", option: str = "--device") -> str:
    """The device ``spec`` stands for on this machine: ``cpu``, ``cuda:N`` or ``mps``.

    ``auto``: ``cuda:0`` when torch sees a GPU, else ``cpu``. ``cuda`` is ``cuda:0``.
    :class:`DeviceError` naming ``option`` for a malformed ``spec``, a GPU torch does not see
    (or an index past the last), or ``mps`` where torch has none."""
    text = parse_device(spec, option)
    if text == "cpu":
        return "cpu"
    if text == "auto":
        return "cuda:0" if gpu_count() else "cpu"
    torch = _torch(option, text)
    if text == "mps":
        mps = getattr(torch.backends, "mps", None)
        if mps is None or not mps.is_available():
            raise DeviceError(f"{option} mps: torch sees no Apple GPU (torch.backends.mps."
                              f"is_available() is False); use {option} cpu or auto")
        return "mps"
    index = int(text.partition(":")[2] or 0)
    count = int(torch.cuda.device_count()) if torch.cuda.is_available() else 0
    if count == 0:
        raise DeviceError(f"{option} {text}: torch sees no GPU (torch.cuda.is_available() is "
                          f"False; torch {torch.__version__}); use {option} cpu or auto")
    if index >= count:
        seen = ", ".join(f"cuda:{i}" for i in range(count))
        raise DeviceError(f"{option} {text}: torch sees {count} GPU{'s' * (count > 1)} "
                          f"({seen}); choose one of them")
    return f"cuda:{index}"


def device_class(device: str) -> str:
    """``cpu``, ``cuda`` or ``mps``: what a device's results depend on (``cuda:1`` is ``cuda``;
    ``auto`` has no class until resolved: :class:`DeviceError`)."""
    text = parse_device(device, "device")
    if text == "auto":
        raise DeviceError("device 'auto' has no class until resolved (resolve_device)")
    return text.partition(":")[0]


def with_device(model_id: str, device: str) -> str:
    """``model_id`` as keyed on ``device`` (a resolved device): unchanged on the CPU,
    ``<model_id>+<class>`` on any other (``all-MiniLM-L6-v2+cuda``)."""
    cls = device_class(device)
    return model_id if cls == "cpu" else f"{model_id}{_SUFFIX}{cls}"


def split_device(model_id: str) -> tuple[str, str]:
    """``(model id on the CPU, device class)`` of a model id made by :func:`with_device`."""
    base, sep, cls = model_id.rpartition(_SUFFIX)
    if sep and cls in ("cuda", "mps"):
        return base, cls
    return model_id, "cpu"


def describe_device(device: str) -> str:
    """A resolved device for people: ``cpu``, ``cuda:0 (NVIDIA H100 80GB HBM3)``."""
    if not device.startswith("cuda"):
        return device
    try:
        import torch

        name = torch.cuda.get_device_name(int(device.partition(":")[2] or 0))
    except Exception:  # noqa: BLE001 - a name is a courtesy, never a failure
        return device
    return f"{device} ({name})"


def embedder_device(embedder: object) -> str:
    """The device an embedder runs its model on (its ``device``; ``cpu`` for an embedder that
    runs none, such as ``hashing``)."""
    device = getattr(embedder, "device", None)
    return device if isinstance(device, str) else "cpu"
