"""Step 1 of answer assembly: the retriever's output as typed assembly input.

``from_retrieval`` maps a :class:`~aiblox.contracts.retrieval.RetrievalBundle` to the input
mapping; ``validation`` checks it into an :class:`~aiblox.assembly.AssemblyInput` or a FAILED
status. The public names are exported by :mod:`aiblox.assembly`.
"""

__all__: list[str] = []
