"""Step 1 of answer assembly: input validation. Raw retrieval output to a typed
:class:`AssemblyInput`, or a FAILED status with a reason naming the result index and field (data,
not an exception).

Hard failures: a required field missing or of the wrong type (``chunk_id``, ``knowledge_id``,
``chunk_text``, ``rank``, ``similarity_score``), ``chunk_text`` null or empty, a rank that is not
a non-negative integer, a similarity score that is not a finite number, missing trace fields
(``request_id``, ``index_version``, ``embedding_model``, ``retrieval_top_k``), and invalid rank
semantics: the smallest rank must be 0, and chunk ids must be unique. Equal ranks are allowed and
ordered by chunk_id (``rank_strict``). An empty result list is valid input and is treated
explicitly as NO_EVIDENCE by selection. Text that becomes empty only after sanitisation is not a
hard failure: selection drops it with DROP_EMPTY_AFTER_SANITIZE.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from aiblox.assembly.records import AssemblyInput

__all__ = ["InputValidation", "validate_assembly_input"]


class InputValidation(BaseModel):
    """Outcome of input validation."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    status: Literal["OK", "FAILED"]
    """OK when the input is usable (possibly empty); FAILED otherwise."""
    assembly_input: AssemblyInput | None = None
    """The typed input when OK."""
    failure_reason: str | None = None
    """Every problem found, ``field: message`` joined by ``; ``, when FAILED."""


def _describe(err: ValidationError) -> str:
    parts = []
    for item in err.errors():
        loc = ""
        for p in item["loc"]:
            loc += f"[{p}]" if isinstance(p, int) else (f".{p}" if loc else str(p))
        msg = "missing required field" if item["type"] == "missing" else item["msg"]
        parts.append(f"{loc or '<input>'}: {msg}")
    return "; ".join(parts)


def validate_assembly_input(raw: AssemblyInput | Mapping[str, Any]) -> InputValidation:
    """Validate assembly input given as a typed model or a plain mapping."""
    data = raw.model_dump() if isinstance(raw, AssemblyInput) else raw
    try:
        parsed = AssemblyInput.model_validate(data)
    except ValidationError as err:
        return InputValidation(status="FAILED", failure_reason=_describe(err))
    problems = []
    if parsed.results:
        min_rank = min(r.rank for r in parsed.results)
        if min_rank != 0:
            problems.append(f"results: ranks must start at 0, smallest rank is {min_rank}")
        seen: dict[str, int] = {}
        for i, r in enumerate(parsed.results):
            if r.chunk_id in seen:
                problems.append(
                    f"results[{i}].chunk_id: duplicate of results[{seen[r.chunk_id]}] "
                    f"({r.chunk_id!r})"
                )
            else:
                seen[r.chunk_id] = i
    if problems:
        return InputValidation(status="FAILED", failure_reason="; ".join(problems))
    return InputValidation(status="OK", assembly_input=parsed)
