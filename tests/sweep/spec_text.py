"""The smallest valid sweep spec, a bm25 board spec, a sample sweep that trains a model, and
writing spec text to a file (shared by the spec, sweep board, training and notebook tests)."""

from pathlib import Path
from typing import Any

MINIMAL = """
name = "t"
dataset = "sample"
tune_split = "train"
report_split = "test"
embedder = "hashing"
"""


def board_bm25(k1: list[float], baseline: bool = False) -> str:
    """A bm25 sweep of the sample over ``k1`` x b 0.2, 1.0 (``board_bm25``), with the base as a
    named ``[baseline]`` when asked: what the sweep board tests plot by its own settings."""
    return f"""
name = "board_bm25"
dataset = "sample"
tune_split = "train"
report_split = "test"
backend = "duckdb"
embedder = "hashing"
metrics = ["ndcg@10", "recall@10"]
primary = "ndcg@10"
[base]
mode = "bm25"
top_k_items = 10
fts = {{ top_k = 10 }}
[grid]
k1 = {k1!r}
b = [0.2, 1.0]
""" + ("[baseline]\n" if baseline else "")


def training(table: str, name: str, embedder: str, pipeline: str, recipe: str, grid: str,
             head: str = "") -> str:
    """A sample sweep (tuned on ``test:0/2``, reported on ``test:1/2``) that trains ``[table]``
    (``finetune``, ``finetune_reranker``) on train with ``recipe``, its lines ``head`` (each
    ending in a newline) after the embedder, a ``pipeline`` and its ``grid`` table."""
    return f"""\
name = "{name}"
dataset = "sample"
tune_split = "test:0/2"
report_split = "test:1/2"
embedder = "{embedder}"
{head}metrics = ["ndcg@10"]
primary = "ndcg@10"
{pipeline}
[{table}]
split = "train"
{recipe}
negative_depth = 5

[base]
top_k_items = 10
scoring = {{ blend = "linear", normalize = "minmax" }}
fts = {{ top_k = 20 }}
vector = {{ top_k = 20 }}

{grid}
"""


AS_LOGGED_HASH = "d91267f9c72d37ae04a6651e8bdb0c99e2d84ff9006d846c86866228b83b43b0"
"""The hash of :func:`as_logged`'s spec, which every axis added since leaves as it was. It was
``50b7ac6705fe...`` until the spec's hash left out where the data and the store lie and the
description (``dataset``, ``db``, ``description``: ``aiblox.sweep.spec_checks.UNHASHED``) and
read the metrics in canonical order (QA, 2026-11-29): every sweep hash moved that once."""


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
