"""Step 4 of answer assembly: the prompt, under Prompt Contract V1.

``contract`` holds the frozen template (``prompt_contract_v1.txt``, its sha256 and version as
constants) and renders and parses prompts; ``builder`` builds the exact prompt bytes for an answer
bundle, with the final token budget loop; ``answer_rules`` is the answer format the template
states, shared by the reader (step 5) and answer validation (step 6), which split answers into
sentences with :mod:`aiblox.assembly.sentence_split` (as the per-chunk cap cuts). The public
names are exported by :mod:`aiblox.assembly`.
"""

__all__: list[str] = []
