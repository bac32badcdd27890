"""The smallest valid sweep spec, and writing spec text to a file (shared by the spec tests)."""

from pathlib import Path
from typing import Any

MINIMAL = """
name = "t"
dataset = "sample"
tune_split = "train"
report_split = "test"
embedder = "hashing"
"""


def as_logged(sample_spec: Any) -> Any:
    """``sample_fusion.toml`` as first logged (depths 5 and 20; 5 became 10 when metric cutoffs
    above a run's depth were refused, issue 25), not validated: only its hash is read, to show
    the hash function still gives the value logged then."""
    grid = sample_spec.grid.model_copy(update={"depth": [5, 20]})
    return sample_spec.model_copy(update={"grid": grid})


def write(tmp_path: Path, text: str) -> Path:
    """``text`` as ``tmp_path/spec.toml``."""
    p = tmp_path / "spec.toml"
    p.write_text(text)
    return p
