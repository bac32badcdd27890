"""Step 6 of answer assembly: the answer validated against its evidence, fail closed.

``checks`` runs every check (citation format and anchors, uncited sentences, refusal, metadata
leaks, meta commentary). The public names are exported by :mod:`aiblox.assembly`.
"""

__all__: list[str] = []
