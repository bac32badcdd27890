"""Step 3 of answer assembly: citation anchors and the evidence block.

``citation_anchors`` gives the chunks, in their final order, anchors ``C0, C1, ...``;
``evidence_block`` renders them as the exact text of the prompt's evidence section. The public
names are exported by :mod:`aiblox.assembly`.
"""

__all__: list[str] = []
