"""Step 5 of answer assembly: the reader, an LLM that answers the exact prompt.

``registry`` defines the :class:`~aiblox.assembly.LLM` protocol and the registry by name;
``extractive`` is the offline deterministic reader, ``openai_chat`` the OpenAI-compatible
chat-completions client. The public names are exported by :mod:`aiblox.assembly`.
"""

__all__: list[str] = []
