"""The benchmark scripts' command lines: a count, size or repeat below its least value is refused
by argparse (usage, one error line naming the option, exit status 2) before any work, instead of
a traceback or a table of made-up numbers; and every script's ``--help`` describes it with its
docstring's whole first paragraph."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.mark.parametrize(("script", "option", "value"), [
    ("retrieval_speed.py", "--batch-size", "-5"),  # printed a PASS table at 24M queries/s
    ("retrieval_speed.py", "--macro-queries", "0"),  # ZeroDivisionError
    ("scale.py", "--docs", "0"),  # a numpy traceback
    ("evidence.py", "--queries", "-3"),  # ran 297 queries
    ("stage_cache.py", "--entries", "0"),  # printed nonsense ratios
    ("recommended_pipeline.py", "--repeat", "0"),  # clamped to 1
    ("cli_startup.py", "--repeats", "x"),
])
def test_a_bad_number_is_one_usage_error(script, option, value, tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(BENCH.parent), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, str(BENCH / script), option, value],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stdout == ""
    errors = [line for line in proc.stderr.splitlines() if "error" in line.lower()]
    assert errors == [proc.stderr.splitlines()[-1]], proc.stderr
    assert errors[0].startswith(f"{script}: error: argument {option}: "), errors


def test_the_number_types():
    sys.path.insert(0, str(BENCH))
    try:
        from _common import nonnegative_int, positive_int
    finally:
        sys.path.remove(str(BENCH))
    import argparse

    assert positive_int("3") == 3 and nonnegative_int("0") == 0
    for bad, kind in (("0", positive_int), ("-1", positive_int), ("-1", nonnegative_int),
                      ("1.5", positive_int), ("", nonnegative_int)):
        with pytest.raises(argparse.ArgumentTypeError):
            kind(bad)


def test_every_script_describes_itself_with_its_docstring_first_paragraph():
    """Through ``_common.arg_parser``: the description used to stop at the docstring's first
    line, mid-sentence, in 11 scripts."""
    sys.path.insert(0, str(BENCH))
    try:
        from _common import arg_parser
    finally:
        sys.path.remove(str(BENCH))
    scripts = sorted(p for p in BENCH.glob("*.py") if p.name != "_common.py")
    assert scripts
    for path in scripts:
        source = path.read_text(encoding="utf-8")
        assert "ArgumentParser(" not in source, path.name
        assert "arg_parser(__doc__)" in source, path.name
        doc = ast.get_docstring(ast.parse(source), clean=False) or ""
        description = arg_parser(doc).description or ""
        assert description.endswith((".", "?", ")")), (path.name, description)
        assert "\n" not in description and len(description) >= 40, (path.name, description)
