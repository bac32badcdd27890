"""Helpers shared by the benchmark scripts: their argument parser and its number types, opening
a quiet store, printing a table.

Not part of the ``aiblox`` package; the scripts import it from their own folder.
"""

from __future__ import annotations

import argparse
import platform
import sys
from collections.abc import Sequence
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    from aiblox.stores import DuckDBStore

__all__ = ["arg_parser", "cpu_name", "environment_line", "err", "minilm_cross_encoder",
           "nonnegative_int", "open_quiet_store", "positive_int", "print_table"]

err = Console(stderr=True)
"""Progress for people goes to stderr; the table alone goes to stdout."""


def arg_parser(doc: str | None) -> argparse.ArgumentParser:
    """The script's parser, its ``--help`` description the first paragraph of the script's
    docstring ``doc`` (whole sentences, however many lines they take)."""
    first = (doc or "").strip().split("\n\n")[0]
    return argparse.ArgumentParser(description=" ".join(first.split()))


def _int(text: str, least: int, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"{value} is not {what}")
    return value


def positive_int(text: str) -> int:
    """An argparse ``type`` for a count, size or repeat: a whole number of at least 1, else
    argparse's one-line usage error (exit status 2) naming the option."""
    return _int(text, 1, "a positive number (at least 1)")


def nonnegative_int(text: str) -> int:
    """An argparse ``type`` for a number where 0 means something (all, none, off): at least 0."""
    return _int(text, 0, "0 or more")


def open_quiet_store(path: str | Path) -> DuckDBStore:
    """A DuckDB store with DuckDB's own terminal progress bar switched off."""
    from aiblox.stores import DuckDBStore

    store = DuckDBStore(path)
    store.con.execute("SET enable_progress_bar = false")
    return store


def environment_line() -> str:
    """Date, Python, DuckDB and CPU count, for the record under a table."""
    import os

    try:
        import duckdb

        db = f"duckdb {duckdb.__version__}, "
    except ImportError:  # a script that runs without aiblox (finetune_recipes.py on a GPU box)
        db = ""
    return (f"{date.today().isoformat()}, Python {platform.python_version()}, "
            f"{db}{os.cpu_count()} CPUs, {platform.machine()}")


def cpu_name() -> str:
    """``cpu (16 threads, <model name>)``: the label of torch's CPU side."""
    import torch

    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"cpu ({torch.get_num_threads()} threads, {model})"


def minilm_cross_encoder(device: str) -> Any:
    """A sentence-transformers ``CrossEncoder`` built from MiniLM's weights with a fresh
    one-output head (seed 0: the same head on every device), 256 word pieces, on ``device``: no
    cross-encoder ships offline, and the head does not change the work a pair costs."""
    import logging
    import os

    import torch
    from sentence_transformers import CrossEncoder
    from transformers.utils import logging as hf_logging

    from aiblox.embedding.sentence_transformers import model_folder, quiet_transformers

    quiet_transformers()
    hf_logging.set_verbosity_error()  # the fresh head's "newly initialized" notice
    logging.getLogger("sentence_transformers").setLevel(logging.ERROR)  # "Converting ..."
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    torch.manual_seed(0)
    return CrossEncoder(str(model_folder("minilm")), num_labels=1, device=device, max_length=256)


def print_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[str]],
                markdown: bool, right: Sequence[str] = (), notes: Sequence[str] = ()) -> None:
    """Print ``rows`` as a rich table, or as a GitHub markdown table when ``markdown``."""
    if markdown:
        out = [f"**{title}**", "", "| " + " | ".join(columns) + " |",
               "|" + "|".join("---:" if c in right else "---" for c in columns) + "|"]
        out += ["| " + " | ".join(r) + " |" for r in rows]
        if notes:
            out += [""] + [f"{n}  " for n in notes]
        sys.stdout.write("\n".join(out) + "\n")
        sys.stdout.flush()
        return
    table = Table(title=title)
    for c in columns:
        table.add_column(c, justify="right" if c in right else "left")
    for r in rows:
        table.add_row(*r)
    console = Console()
    if not console.is_terminal or console.width < 150:
        console = Console(width=150)  # wide enough for every column, also when piped
    console.print(table)
    for n in notes:
        console.print(n, highlight=False)


def paired_delta(a: dict[str, float], b: dict[str, float]) -> tuple[float, float, float, str, str]:
    """``b - a`` over the queries both score: the mean difference and its 95% paired bootstrap
    interval (1,000 resamples, seed 0), the paired t-test's p (3 decimals) and W/T/L."""
    from aiblox.metrics import bootstrap_ci, paired_test

    qids = sorted(set(a) & set(b))
    mean, lo, hi = bootstrap_ci([b[q] - a[q] for q in qids], seed=0)
    t = paired_test(a, b)
    return mean, lo, hi, f"{t.p_value:.3f}", f"{t.wins}/{t.ties}/{t.losses}"
