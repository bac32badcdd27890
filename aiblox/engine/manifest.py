"""Determinism manifest of one sweep point: everything needed to check that a re-run gives the
same bytes (dataset hash, config hash, stage keys and output hashes, run hashes) and where it
was made (package versions, git commit, the CPU).

A pipeline point (chunking, selection) lists every stage in pipeline order per split (signals,
fusion, metrics, chunks, chunk_metrics, then selection, prompt, reader, validation,
answer_metrics) and the sha256 of all its prompt bytes; its ``config`` holds the chunking
settings and the selection policy.

``manifest_hash`` covers the deterministic part only (not the environment, nor the folder the
dataset was read from, nor the device the embedder ran on, whose class is in the embedder's
model id in ``config``), so the same point computed on two machines has the same manifest hash
when its results are identical.
"""

from __future__ import annotations

import platform
import subprocess
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from aiblox.hashing import sha256_hex
from aiblox.metrics import canonical_metrics

__all__ = ["MANIFEST_VERSION", "PointManifest", "SplitManifest", "cpu", "environment",
           "git_commit"]

MANIFEST_VERSION = 1

PACKAGES = ("aiblox", "duckdb", "mlflow", "numpy", "pandas", "pydantic", "ranx",
            "sentence-transformers", "torch")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class SplitManifest(_Strict):
    """The stages of one point on one split."""

    split: str
    """Split name."""
    n_queries: int
    """Judged queries scored."""
    stages: list[dict[str, Any]]
    """Stage records in pipeline order: name, version, key, input keys, output hash."""
    run_hash: str
    """The output hash of the stage whose run the metrics scored (the sha256 of its stored
    arrays: ``aiblox.run_hash.<split>``, what ``aiblox report`` shows). Not the ``run`` hash
    ``aiblox eval`` prints (:func:`aiblox.engine.result.run_hash`, the hash of the run as its TREC
    file carries it, ``aiblox.trec_hash.<split>``): one run has both, and they differ."""
    metrics: dict[str, float]
    """Mean metric values."""
    prompts_sha256: str | None = None
    """Pipeline points with selection: sha256 of every prompt's bytes on this split (the
    ``prompt`` stage's ``prompts_sha256``); None otherwise."""


class PointManifest(_Strict):
    """Determinism manifest of one sweep point."""

    version: int = MANIFEST_VERSION
    """Manifest format version."""
    sweep: str
    """Sweep name."""
    sweep_hash: str
    """sha256 of the sweep spec."""
    dataset: str
    """Dataset name."""
    dataset_hash: str
    """sha256 of the dataset files."""
    dataset_path: str | None = None
    """Where the dataset was read from, resolved (its folder, or its ``*.toml`` manifest file):
    ``aiblox eval verify`` re-reads the very files there and checks their hash. None for a
    dataset not read from files (DataFrames) and in manifests written before it was recorded
    (verify then finds the dataset by name). Not part of ``manifest_hash``: it names this
    machine's folders."""
    config_hash: str
    """sha256 of the point's effective config (same as ``aiblox eval`` reports)."""
    config: dict[str, Any]
    """The effective config: prefs without the query, embedder, backend."""
    embedder_name: str | None = None
    """Registry name of the embedder (``config`` holds its model id), to rebuild the point; a
    ``[finetune]`` model's reference (its folder in ``models``; a manifest from before
    references names the folder)."""
    models: dict[str, str] | None = None
    """The folders of the trained models the point's embedder and stages name by reference
    (``finetune:ft-<hex>@<hex>``, a ``[finetune]`` embedder; ``finetune:ce-<hex>@<hex>``, a
    ``[finetune_reranker]`` model), where the sweep wrote them: ``aiblox eval verify`` scores
    with the files there (their id is in every stage key). None: none. Not part of
    ``manifest_hash``: it names this machine's folders."""
    device: str | None = None
    """The device the embedder ran on, resolved (``cpu``, ``cuda:0 (NVIDIA H100 80GB HBM3)``;
    None: a manifest from before devices, made on the CPU). Not part of ``manifest_hash``:
    off the CPU the embedder's model id in ``config`` carries the device class."""
    metrics: list[str] = Field(default_factory=list)
    """ranx metric names scored, in the order they were listed (hashed in canonical order)."""
    splits: dict[str, SplitManifest]
    """Per split: stages, run hash, metrics."""
    environment: dict[str, Any] = Field(default_factory=dict)
    """Package versions, Python version and git commit (not part of ``manifest_hash``)."""

    @property
    def manifest_hash(self) -> str:
        """sha256 of everything but the environment, the dataset's path (where it lies on this
        machine; the dataset hash says what it holds), the trained models' folders and the
        device, with :attr:`metrics` in canonical order
        (:func:`~aiblox.metrics.canonical_metrics`: the order they were listed in is how they
        are shown, and the stages computed the same). Optional fields added later
        are left out while None, so a fusion point's manifest hash is what it was before they
        existed."""
        data = self.model_dump(mode="json", exclude={"environment", "dataset_path", "device",
                                                      "models"})
        data["metrics"] = canonical_metrics(data["metrics"])
        for split in data["splits"].values():
            if split.get("prompts_sha256") is None:
                split.pop("prompts_sha256", None)
        return sha256_hex(data)


@lru_cache(maxsize=1)
def git_commit(start: str | None = None) -> str | None:
    """The commit checked out where aiblox lives (None outside a git checkout), with ``+dirty``
    appended when tracked files are modified."""
    cwd = start or str(Path(__file__).resolve().parent)
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True,
                              text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=cwd, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{head}+dirty" if dirty else head


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


@lru_cache(maxsize=1)
def cpu() -> str:
    """The CPU, as its model name and the widest vector instructions it has (``AMD EPYC 7B13
    (avx2)``, ``Intel(R) Xeon(R) Processor (avx512)``): a neural embedder's kernels differ
    between those, and so do the last bits of its vectors, the scores computed from them and
    every hash after them (the metrics rarely). Read from ``/proc/cpuinfo`` where there is one,
    else :func:`platform.processor`."""
    model, flags = "", set[str]()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                name, _, value = line.partition(":")
                name = name.strip()
                if name == "model name" and not model:
                    model = value.strip()
                elif name == "flags" and not flags:
                    flags = set(value.split())
                if model and flags:
                    break
    except OSError:
        pass
    model = model or platform.processor() or platform.machine() or "unknown CPU"
    isa = next((f for f in ("avx512", "avx2", "avx") if f in flags or f + "f" in flags), None)
    return f"{model} ({isa})" if isa else model


@lru_cache(maxsize=1)
def _environment() -> tuple[tuple[str, Any], ...]:
    env = {"python": platform.python_version(),
           "packages": {p: _version(p) for p in PACKAGES},
           "git_commit": git_commit(), "cpu": cpu()}
    return tuple(env.items())


def environment() -> dict[str, Any]:
    """Package versions, Python version, git commit and :func:`cpu` (computed once per
    process)."""
    return {k: (dict(v) if isinstance(v, dict) else v) for k, v in _environment()}
