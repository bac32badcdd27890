"""The selection policy every step of answer assembly reads: frozen values for chunk selection
and prompt budgets, read from a versioned TOML file (``evals/policies/R2_POLICY_V1.toml``; the
policy's version names its file)."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from aiblox.hashing import sha256_hex

__all__ = [
    "DEFAULT_POLICY_VERSION",
    "POLICIES_DIR_ENV",
    "PolicyError",
    "PROMPT_OVERHEAD_TOKENS",
    "SHIPPED_POLICY_SHA256",
    "SelectionPolicy",
    "find_policies_dir",
    "load_policy",
]

DEFAULT_POLICY_VERSION = "R2_POLICY_V1"
POLICIES_DIR_ENV = "AIBLOX_POLICIES_DIR"


SHIPPED_POLICY_SHA256 = {
    "R2_POLICY_V1": "f922cc7ebaec60201e4a91bc9432211d9f665c609ee28320a9a93109ef0b47ce",
    "R2_POLICY_V2": "07e0e6328cc65f737f6c8ee6ebcc86547e64aebb195c9c1e75928f08646684c4",
}
"""The shipped versions' :meth:`SelectionPolicy.sha256`, pinned in code: a policy that takes
one of these names, loaded by name from whichever ``evals/policies`` folder or by path, must
have these values. A local folder's edited ``R2_POLICY_V1.toml`` was used silently and its
results labelled R2_POLICY_V1, and a changed copy by path was refused or accepted by the
folder the command ran in. A test checks each against its file in ``evals/policies``."""


class PolicyError(ValueError):
    """A policy file is missing, is not valid TOML, or has a bad field (file and field named)."""


PROMPT_OVERHEAD_TOKENS = {"cl100k_base": 361, "o200k_base": 359}
"""Tokens of the frozen Prompt Contract V1 prompt with no evidence and a one-character question
(``render_prompt("", "?")``), per encoding: the least any prompt takes beside its evidence. A
constant of the contract (its template's sha256 is checked), kept here because the prompt
builder reads policies; a test renders the prompt and checks it."""


class SelectionPolicy(BaseModel):
    """Selection policy snapshot; every value is frozen for a given ``policy_version``."""

    # strict: a TOML policy says what it means (max_chunks = "6", a string, or true was taken)
    # allow_inf_nan: TOML reads nan and inf; a NaN floor compared false to every score (no
    # floor at all), and either failed the policy's hash after retrieval, naming no field
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False,
                              use_attribute_docstrings=True)

    policy_version: str = Field(min_length=1)
    """Name of this frozen policy, e.g. ``R2_POLICY_V1``; equals the file's stem."""
    max_chunks: int = Field(ge=1)
    """At most this many chunks in the evidence."""
    max_chunks_per_knowledge_id: int = Field(ge=1)
    """At most this many chunks from one knowledge item (a cap, not one-per-document)."""
    max_evidence_tokens: int = Field(ge=1)
    """Token budget of the rendered evidence block (headers included)."""
    reserved_output_tokens: int = Field(ge=1)
    """Tokens reserved for the model's answer, counted inside the total budget (at least 1:
    with 0 the request asked for no answer and every answer was cut off)."""
    max_total_prompt_tokens: int = Field(ge=1)
    """Prompt tokens plus reserved output tokens may not exceed this."""
    max_chunk_token_ratio: float = Field(gt=0.0, le=1.0)
    """One chunk may use at most this share of ``max_evidence_tokens``; longer chunks are cut
    to their longest prefix that fits and ends a sentence (``truncation_applied``;
    :mod:`~aiblox.assembly.selection.token_truncation`)."""
    overlap_ratio_threshold: float = Field(ge=0.0, le=1.0)
    """A chunk whose word overlap ratio with a better-ranked kept chunk exceeds this is a
    near-duplicate (DROP_DUP)."""
    ordering_mode: Literal["rank_strict"]
    """Evidence order: rank ascending, chunk_id ascending on ties."""
    sanitization_mode: Literal["safe_normalize_v1"]
    """Sanitiser applied to evidence and question text."""
    strict_no_evidence: Literal[True]
    """Empty evidence after any gate gives NO_EVIDENCE: no prompt, no LLM call, the refusal."""
    min_similarity_score: float | None = None
    """Per-chunk similarity floor (DROP_BELOW_SIMILARITY_FLOOR); None or absent: no floor."""
    top_similarity_gate: float | None = None
    """Entry gate: when the best similarity is below this, every chunk is dropped
    (DROP_BELOW_SIMILARITY_FLOOR) and the answer is refused; None or absent: no gate."""
    max_question_tokens: int = Field(default=512, ge=1)
    """A question longer than this fails assembly (questions are never truncated)."""
    token_encoding: Literal["cl100k_base", "o200k_base"] = "cl100k_base"
    """tiktoken encoding of every token count."""
    prompt_contract_version: Literal["PROMPT_CONTRACT_V1"] = "PROMPT_CONTRACT_V1"
    """Prompt contract this policy's budgets were set for."""

    @model_validator(mode="after")
    def _budgets_consistent(self) -> SelectionPolicy:
        if self.reserved_output_tokens >= self.max_total_prompt_tokens:
            raise ValueError("reserved_output_tokens must be below max_total_prompt_tokens")
        room = self.max_total_prompt_tokens - self.reserved_output_tokens
        if self.max_evidence_tokens > room:
            # the seed: evidence tokens plus the reserved output fit the total budget. A larger
            # evidence budget is never usable, and its per-chunk cap (a share of it) let one
            # chunk through that the total then dropped with every chunk after it: raising
            # the budget refused answers the smaller one gave
            raise ValueError(
                f"max_evidence_tokens ({self.max_evidence_tokens}) plus reserved_output_tokens "
                f"({self.reserved_output_tokens}) exceed max_total_prompt_tokens "
                f"({self.max_total_prompt_tokens}): set max_evidence_tokens to at most {room}, "
                f"or raise max_total_prompt_tokens")
        return self

    @model_validator(mode="after")
    def _room_for_one_chunk(self) -> SelectionPolicy:
        # a policy under which no prompt can hold one chunk refused every question (or failed
        # it) after retrieval, and stored the pack: refused here, when it is loaded
        from aiblox.assembly.anchoring.evidence_block import render_evidence_entry
        from aiblox.text.tokens import count_tokens

        entry = count_tokens(render_evidence_entry("C0", "c", "k", "s", "x"),
                             self.token_encoding)
        if self.max_evidence_tokens < entry:
            raise ValueError(f"max_evidence_tokens ({self.max_evidence_tokens}) is below the "
                             f"smallest evidence entry ({entry} tokens: its header and one "
                             f"word): no chunk could ever be selected")
        overhead = PROMPT_OVERHEAD_TOKENS[self.token_encoding]
        room = self.max_total_prompt_tokens - self.reserved_output_tokens - overhead
        if room < entry:
            raise ValueError(f"max_total_prompt_tokens ({self.max_total_prompt_tokens}) less "
                             f"reserved_output_tokens ({self.reserved_output_tokens}) and the "
                             f"prompt's own {overhead} tokens (a one-word question) leaves "
                             f"{room} for evidence, under the smallest evidence entry ({entry} "
                             f"tokens): no prompt could ever be built")
        return self

    @property
    def per_chunk_token_cap(self) -> int:
        """Largest token count a single chunk may have."""
        return max(1, int(self.max_chunk_token_ratio * self.max_evidence_tokens))

    def thresholds(self) -> dict[str, float | int | None]:
        """Every threshold and budget used by selection, for the trace."""
        return {
            "max_chunks": self.max_chunks,
            "max_chunks_per_knowledge_id": self.max_chunks_per_knowledge_id,
            "max_evidence_tokens": self.max_evidence_tokens,
            "reserved_output_tokens": self.reserved_output_tokens,
            "max_total_prompt_tokens": self.max_total_prompt_tokens,
            "max_chunk_token_ratio": self.max_chunk_token_ratio,
            "overlap_ratio_threshold": self.overlap_ratio_threshold,
            "min_similarity_score": self.min_similarity_score,
            "top_similarity_gate": self.top_similarity_gate,
            "max_question_tokens": self.max_question_tokens,
        }

    def sha256(self) -> str:
        """sha256 of the canonical JSON of every field."""
        return sha256_hex(self.model_dump(mode="json"))

    def with_updates(self, **changes: Any) -> SelectionPolicy:
        """A validated copy with some fields changed (for sweeps and tests)."""
        return SelectionPolicy.model_validate({**self.model_dump(), **changes})


def find_policies_dir(start: Path | None = None) -> Path | None:
    """The ``evals/policies`` folder: ``$AIBLOX_POLICIES_DIR``, else the first
    ``evals/policies`` found walking up from ``start`` (default: the current directory), else the
    one beside the installed package's repository. A file found here that takes a shipped
    version's name with other values is refused when loaded (:func:`load_policy`)."""
    env = os.environ.get(POLICIES_DIR_ENV)
    if env:
        return Path(env)
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / "evals" / "policies"
        if candidate.is_dir():
            return candidate
    repo = Path(__file__).resolve().parents[2] / "evals" / "policies"
    return repo if repo.is_dir() else None


def _format_validation_error(path: Path, err: ValidationError) -> str:
    parts = []
    for item in err.errors():
        field = ".".join(str(p) for p in item["loc"]) or "<policy>"
        parts.append(f"field '{field}': {item['msg']}")
    return f"{path}: invalid selection policy: " + "; ".join(parts)


def load_policy(
    name_or_path: str | os.PathLike[str] = DEFAULT_POLICY_VERSION,
    *,
    policies_dir: str | os.PathLike[str] | None = None,
) -> SelectionPolicy:
    """Load a selection policy by version name (``R2_POLICY_V1``, looked up as
    ``<policies_dir>/<name>.toml``) or by explicit path to a ``.toml`` file. Either way a
    policy that takes a shipped version's name must have its pinned values
    (:data:`SHIPPED_POLICY_SHA256`), whichever folder it came from.

    Raises :class:`PolicyError` naming the file (and the TOML line or the field) on bad input.
    """
    raw = os.fspath(name_or_path)
    as_path = Path(raw)
    if raw.endswith(".toml") or as_path.is_file():
        path = as_path
        by_name = None
    else:
        folder = Path(policies_dir) if policies_dir is not None else find_policies_dir()
        if folder is None:
            raise PolicyError(
                f"policy '{raw}': no evals/policies folder found (set {POLICIES_DIR_ENV} or pass "
                "policies_dir)"
            )
        if policies_dir is None and os.environ.get(POLICIES_DIR_ENV) and not folder.is_dir():
            raise PolicyError(f"policy '{raw}': environment variable {POLICIES_DIR_ENV}="
                              f"{str(folder)!r}: expected a folder of policies (<name>.toml); "
                              f"there is no such folder")
        path = folder / f"{raw}.toml"
        by_name = raw
    if not path.is_file():
        known = (sorted(p.stem for p in path.parent.glob("*.toml"))
                 if by_name is not None and path.parent.is_dir() else [])
        raise PolicyError(f"{path}: policy file not found"
                          + (f"; known: {', '.join(known)}" if known else ""))
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise PolicyError(f"{path}: not valid TOML: {exc}") from exc
    except UnicodeDecodeError as exc:  # TOML is UTF-8; tomllib raises this bare
        raise PolicyError(f"{path}: not UTF-8 (TOML is): byte {exc.start}: {exc.reason}"
                          ) from exc
    except OSError as exc:
        raise PolicyError(f"{path}: cannot be read: {exc.strerror or exc}") from exc
    try:
        policy = SelectionPolicy.model_validate(data)
    except ValidationError as exc:
        raise PolicyError(_format_validation_error(path, exc)) from exc
    if by_name is not None and policy.policy_version != by_name:
        raise PolicyError(
            f"{path}: field 'policy_version': is '{policy.policy_version}', "
            f"expected '{by_name}' (the file name)"
        )
    _check_not_a_changed_copy(path, policy, policies_dir, by_name=by_name is not None)
    return policy


def _shipped_policy(version: str) -> SelectionPolicy | None:
    """The shipped file of ``version`` beside the package (a checkout or an editable install),
    when it is there and still has its pinned values: the frozen values to name a change by."""
    path = Path(__file__).resolve().parents[2] / "evals" / "policies" / f"{version}.toml"
    try:
        with path.open("rb") as fh:
            shipped = SelectionPolicy.model_validate(tomllib.load(fh))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError, ValidationError):
        return None
    return shipped if shipped.sha256() == SHIPPED_POLICY_SHA256.get(version) else None


def _changes(policy: SelectionPolicy, original: SelectionPolicy) -> str:
    mine, theirs = policy.model_dump(), original.model_dump()
    return ", ".join(f"{k} ({theirs[k]!r} -> {mine[k]!r})"
                     for k in sorted(mine) if mine[k] != theirs[k])


def _check_not_a_changed_copy(path: Path, policy: SelectionPolicy,
                              policies_dir: str | os.PathLike[str] | None,
                              *, by_name: bool = False) -> None:
    """A policy may not take a frozen version's name while changing its values: a version
    names frozen values, and packs, sweeps and comparisons label their results by it. A
    shipped version (:data:`SHIPPED_POLICY_SHA256`) is checked however the file was found,
    by name or by path; a policy loaded by path is also checked against a same-named policy
    of the policies folder (a user's own frozen versions)."""
    pinned = SHIPPED_POLICY_SHA256.get(policy.policy_version)
    if pinned is not None:
        if policy.sha256() == pinned:
            return
        shipped = _shipped_policy(policy.policy_version)
        changed = (f"changes {_changes(policy, shipped)}" if shipped is not None else
                   f"has other values (sha256 {policy.sha256()[:12]}, frozen {pinned[:12]})")
        raise PolicyError(
            f"{path}: field 'policy_version': '{policy.policy_version}' is a shipped frozen "
            f"policy, and this file {changed}; give the changed policy a version name of its "
            f"own")
    if by_name:
        return
    folder = Path(policies_dir) if policies_dir is not None else find_policies_dir()
    if folder is None:
        return
    frozen = folder / f"{policy.policy_version}.toml"
    if not frozen.is_file() or frozen.resolve() == path.resolve():
        return
    try:
        with frozen.open("rb") as fh:
            original = SelectionPolicy.model_validate(tomllib.load(fh))
    except (OSError, tomllib.TOMLDecodeError, ValidationError):
        return  # that file's own problem, reported when it is loaded by name
    if original == policy:
        return
    raise PolicyError(
        f"{path}: field 'policy_version': '{policy.policy_version}' is the frozen policy "
        f"{frozen}, and this file changes {_changes(policy, original)}; give the changed "
        f"policy a version name of its own"
    )
