"""Step 2 of answer assembly: the selection policy's gates choose and order the chunks.

``chunk_selection`` runs the gates; ``sanitize`` (the sanitiser), ``overlap_ratio`` (the
near-duplicate measure) and ``token_truncation`` (the per-chunk token cap) are the pieces it
applies. The public names are exported by :mod:`aiblox.assembly`.
"""

__all__: list[str] = []
