"""The smallest valid sweep spec, and writing spec text to a file (shared by the spec tests)."""

from pathlib import Path

MINIMAL = """
name = "t"
dataset = "sample"
tune_split = "train"
report_split = "test"
embedder = "hashing"
"""


def write(tmp_path: Path, text: str) -> Path:
    """``text`` as ``tmp_path/spec.toml``."""
    p = tmp_path / "spec.toml"
    p.write_text(text)
    return p
