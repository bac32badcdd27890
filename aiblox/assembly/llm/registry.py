"""Step 5 of answer assembly, the reader: the :class:`LLM` protocol and a registry of
implementations by name.

An LLM takes the exact prompt text built by the prompt builder and returns an
:class:`LLMExecutionResult`; it must not append instructions, switch models on failure, or edit
the model's text. Built-in implementations register through the same :func:`register_llm` as
third-party ones: ``extractive`` (offline, deterministic) and ``openai`` (OpenAI-compatible chat
completions over HTTP, needs the ``llm`` extra).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from aiblox.assembly.records import LLMExecutionResult

if TYPE_CHECKING:
    from aiblox.assembly.policy import SelectionPolicy

__all__ = ["LLM", "LLMFactory", "available_llms", "get_llm", "reader_for_policy", "register_llm"]


@runtime_checkable
class LLM(Protocol):
    """Something that answers a prompt.

    An implementation whose result is a function of the prompt alone, a FAILED one included,
    may say so with a class attribute ``deterministic = True`` (the extractive reader's; not a
    member of the protocol, which an implementation without it still follows). Without it a
    FAILED result is taken to say what its endpoint did (a refused connection, a timeout, an
    HTTP error status, a malformed response), not what the prompt gives: a sweep asks again on
    its next run instead of reusing it (:func:`aiblox.engine.compute.reader_reusable`)."""

    name: str
    """Registry name of the implementation."""
    model_name: str
    """Model identity, logged in every result."""

    def generate(
        self, prompt_text: str, *, request_id: str, max_output_tokens: int
    ) -> LLMExecutionResult:
        """Send ``prompt_text`` unchanged and return the execution telemetry."""
        ...


LLMFactory = Callable[..., LLM]
_REGISTRY: dict[str, LLMFactory] = {}


def register_llm(name: str, factory: LLMFactory, *, replace: bool = False) -> None:
    """Register ``factory`` (called with keyword options) under ``name``."""
    _register_builtins()  # first: a built-in name is taken before any use, not only after
    if name in _REGISTRY and not replace:
        raise ValueError(f"an LLM named {name!r} is already registered")
    _REGISTRY[name] = factory


def available_llms() -> list[str]:
    """Registered names, sorted."""
    _register_builtins()
    return sorted(_REGISTRY)


def get_llm(name: str, **options: Any) -> LLM:
    """Build the LLM registered as ``name`` with ``options``."""
    _register_builtins()
    try:
        factory = _REGISTRY[name]
    except KeyError:
        raise ValueError(
            f"unknown LLM {name!r}; available: {', '.join(sorted(_REGISTRY))}"
        ) from None
    return factory(**options)


def reader_for_policy(llm: LLM, policy: SelectionPolicy) -> LLM:
    """``llm`` as it answers the prompts of ``policy``: the extractive reader left without a
    ``token_encoding`` counts tokens (the prompt's, and the answer's against the reserved output
    tokens) with the policy's, as the prompt was built; any other reader as it is."""
    from aiblox.assembly.llm.extractive import ExtractiveLLM

    if isinstance(llm, ExtractiveLLM) and llm.token_encoding is None:
        return llm.with_token_encoding(policy.token_encoding)
    return llm


def _extractive(**options: Any) -> LLM:
    from aiblox.assembly.llm.extractive import ExtractiveLLM

    return ExtractiveLLM(**options)


def _openai(**options: Any) -> LLM:
    from aiblox.assembly.llm.openai_chat import OpenAIChatLLM

    return OpenAIChatLLM(**options)


def _register_builtins() -> None:
    for name, factory in (("extractive", _extractive), ("openai", _openai)):
        _REGISTRY.setdefault(name, factory)
