"""What the engine computes and keys: a :class:`Task` (name, version, config, inputs, compute
function, codec), the one table of stage versions (:data:`STAGE_VERSIONS`), stage keys
(:func:`stage_key`) and the record a manifest keeps of each (:class:`StageRecord`).

A task's key is the sha256 of its name, its version, its config and the keys of its inputs
(:func:`stage_key`), so it changes exactly when something that decides the task's output
changes, and everything downstream of a changed task gets a new key too. Outputs are memoised
by key on disk (:class:`~aiblox.engine.cache.StageCache`); the config of every stage of a point
is built by :mod:`aiblox.engine.configs`.

An output its task may not reuse (:attr:`Task.reusable`: a reader's failed generations, which
say what the endpoint did, not what the prompt gives) is stored under a key of its own instead,
the stage's config and the output's sha256 (:func:`output_keyed_config`): no later run looks
that key up, so the next one computes the stage again, and every stage after it, keyed by that
key, with it; the same output gives the same key and bytes."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any, Literal

from aiblox.hashing import canonical_plain_json, sha256_text

__all__ = ["STAGE_VERSIONS", "StageRecord", "Task", "is_output_keyed", "make_task",
           "output_keyed_config", "stage_key"]

STAGE_VERSIONS: Mapping[str, str] = {
    "signals": "1",
    "fusion": "2",  # 2: stored as compact arrays (flat positions, counts, scores)
    "metrics": "2",  # 2: stored as arrays (metric names, query ids, means, per-query matrix)
    "chunks": "1",
    "chunk_metrics": "1",
    "selection": "4",  # 2: duplicates against kept chunks only; invisible-only text is empty;
    #                    3: the overlap ratio is the candidate's share of words in a kept
    #                    chunk; the first chunk cut to a budget a long question shrank; a cut
    #                    chunk ends at a sentence end; 4: the sentence end is the splitter's
    #                    (aiblox.assembly.sentence_split), ambiguous full stops not taken
    "prompt": "1",
    "reader": "6",  # 2: a sentence opening with a Markdown heading is never quoted; 3: sentences
    #                 split failing closed (aiblox.assembly.sentence_split); 4: split at a
    #                 terminator touching a marker; 5: a sentence validation would refuse as a
    #                 malformed marker ([1], (C2)) is never quoted; tokens counted with the
    #                 policy's encoding; 6: an output holding a failed generation of a reader
    #                 that calls an endpoint is keyed by its output, never by the stage's key
    "validation": "4",  # 2: the fail-closed sentence split, and NO_CONTENT; 3: split at a
    #                     terminator touching a marker, CONTROL_CHARACTER, RESULT_MISMATCH; 4:
    #                     MALFORMED_CITATION for any bracket form, numbered references, glued
    #                     brackets and full-width or zero-width variants
    "answer_metrics": "2",  # 2: a chunk the policy cut holds only what it kept (an answer
    #                         past the cut counted for evidence_answer_recall and citations)
}
"""The version of every stage, in pipeline order: bump a stage's version when what it computes
changes for the same config and inputs (its key changes, and so does every key downstream)."""


def stage_key(name: str, version: str | int, config: Any, inputs: Sequence[str] = ()) -> str:
    """sha256 of ``{"name", "version", "config", "inputs"}`` in canonical JSON."""
    return sha256_text(canonical_plain_json({"name": name, "version": str(version),
                                             "config": config, "inputs": list(inputs)}))


_OUTPUT_KEYED = "output_sha256"
"""The field of an output-keyed config that holds the output's sha256."""


def output_keyed_config(config: Any, output_hash: str) -> dict[str, Any]:
    """The config an output its task may not reuse is stored under (:attr:`Task.reusable`):
    the stage's ``config`` and the output's sha256, so its key names that very output."""
    return {"config": config, _OUTPUT_KEYED: output_hash}


def is_output_keyed(config: Any) -> bool:
    """Whether a stored entry's ``config`` is an :func:`output_keyed_config`."""
    return isinstance(config, dict) and set(config) == {"config", _OUTPUT_KEYED}


@dataclass(frozen=True)
class Task:
    """The engine's keyed unit, one stage of one point: what decides its output, and the
    function that computes it."""

    name: str
    """Stage name, a key of :data:`STAGE_VERSIONS`."""
    version: str
    """The stage's version (from :data:`STAGE_VERSIONS`)."""
    config: Any
    """What decides the output besides the inputs (plain JSON data)."""
    inputs: tuple[str, ...]
    """Keys of the stages whose outputs it reads."""
    compute: Callable[[], Any]
    """Computes the output (called only when the stage cache has none)."""
    codec: Literal["json", "arrays"] = "json"
    """How the output is stored: canonical JSON, or named numpy arrays."""
    counted_as: str | None = None
    """The name the stage cache counts it under (None: ``name``): a single-signal point's
    ``fusion`` stage, its one list cut to ``top_k_items``, counts as ``cut``, so a sweep's
    counts name only real fusion. Never part of the key."""
    stored: bool = True
    """Whether the stage cache stores the output (False: it records its key and output hash
    only, and computes the output again, checked against that hash, when a stage reads it: for
    outputs that cost less to compute than to store). Never part of the key."""
    reusable: Callable[[Any], bool] | None = None
    """Whether an output computed is the stage's result, to be reused by every later run (None:
    always). One it is not (a reader's failed generations: the endpoint's trouble) is stored
    under :func:`output_keyed_config`'s key, which its record carries, not under :attr:`key`:
    a later run computes the stage again. Never part of the key."""

    @cached_property
    def key(self) -> str:
        """:func:`stage_key` of the record (computed once)."""
        return stage_key(self.name, self.version, self.config, self.inputs)

    def given(self, output: Any) -> Task:
        """This task with ``output`` as what it computes (an output computed ahead, several
        stages' at once: :func:`aiblox.engine.ahead.batches_ahead`); the same key."""
        task = replace(self, compute=lambda: output)
        task.__dict__["key"] = self.key  # cached_property's slot: the key is not hashed again
        return task


def make_task(name: str, config: Any, inputs: Sequence[str], compute: Callable[[], Any],
              codec: Literal["json", "arrays"] = "json", counted_as: str | None = None,
              stored: bool = True, reusable: Callable[[Any], bool] | None = None) -> Task:
    """A :class:`Task` at its version in :data:`STAGE_VERSIONS`."""
    return Task(name, STAGE_VERSIONS[name], config, tuple(inputs), compute, codec, counted_as,
                stored, reusable)


@dataclass(frozen=True)
class StageRecord:
    """What the manifest records of one stage execution (or reuse)."""

    name: str
    version: str
    key: str
    inputs: tuple[str, ...]
    output_hash: str

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON form (for manifests)."""
        return {"name": self.name, "version": self.version, "key": self.key,
                "inputs": list(self.inputs), "output_hash": self.output_hash}
