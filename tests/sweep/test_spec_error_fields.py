"""Every spec error names the field it is about, and the line where that field is written:
errors of the spec as a whole (``primary metric 'x' is not in metrics``, ``tune_split and
report_split must differ``, ``chunk_k must be positive ints``, a ``[search]`` objective
unknown, a ``[baseline]`` key unknown) read ``spec.toml: field '(spec)': ...`` with no line
before."""

from __future__ import annotations

import pytest
from spec_text import MINIMAL, write

from aiblox.sweep import SweepSpecError, load_spec

CHUNKING = '[grid.chunking]\nchunker_id = ["sentences"]\n'
NO_REPORT = MINIMAL.replace('report_split = "test"\n', "")  # name .. embedder: lines 2-5


@pytest.mark.parametrize(("text", "line", "field", "words"), [
    (MINIMAL + 'primary = "map@7"\n', 7, "primary", "got 'map@7': not in metrics ["),
    (MINIMAL.replace('"test"', '"train"'), 5, "report_split",
     "got 'train': must differ from tune_split"),
    (NO_REPORT, None, "report_split", "required (or set [cv] folds = k"),
    (MINIMAL + "query_limit = 5\n", 7, "query_limit", "applies to pipeline sweeps only"),
    (MINIMAL + "chunk_k = [1, 0]\n" + CHUNKING, 7, "chunk_k[1]",
     "got 0: out of range; valid: a whole number >= 1"),
    (MINIMAL + "chunk_k = []\n" + CHUNKING, 7, "chunk_k", "needs at least one k"),
    (MINIMAL + '[base]\nquery_text = "x"\n', 8, "base.query_text", "a query's own"),
    (MINIMAL + 'backend = "postgres"\n', 7, "backend", "does not match db None"),
    # QA8 s7: bad filters got no line, and failed only once the run had started (a date or
    # nan as an internal error of JSON)
    (MINIMAL + '[base]\nfilters = { lang = "en" }\n', 8, "base.filters",
     "unknown filter field 'lang'"),
    (MINIMAL + '[base]\nfilters = { "metadata.d" = 2021-01-05 }\n', 8, "base.filters",
     "write the text stored, e.g. '2021-01-05'"),
    (MINIMAL + '[base]\nfilters = { "metadata.s" = nan }\n', 8, "base.filters",
     "filter 'metadata.s': nan is not a finite number"),
    (MINIMAL + '[base]\nfilters = { "metadata.t" = { a = 1 } }\n', 8, "base.filters",
     "{'a': 1} is not a string, number or boolean"),
    (MINIMAL + 'pipeline = "retrieve"\n[stages.retrieve]\nfilters = { "metadata." = 1 }\n', 8,
     "stages.retrieve", "unknown filter field 'metadata.'"),
    (MINIMAL + "[base]\ntop_k_chunks = 0\n" + CHUNKING, 8, "base.top_k_chunks",
     "got 0: must be >= 1 in a pipeline sweep"),
    (MINIMAL + CHUNKING + "[baseline]\ntop_k_chunks = 0\n", 10, "baseline.top_k_chunks",
     "got 0: out of range; valid: a whole number >= 1"),
    (MINIMAL + "[stages.rm3]\nfb_docs = 5\n", 7, "stages.rm3",
     "configures a stage of a pipeline: set pipeline"),
    (MINIMAL + '[search]\nobjectives = ["ndcg@10", "bogus@3"]\n', 8, "search.objectives",
     "unknown metric(s) ['bogus@3']"),
    (MINIMAL + '[search]\nobjectives = ["ndcg@10"]\n', 8, "search.objectives",
     "at least two distinct names"),
    (MINIMAL + '[search]\nobjectives = ["ndcg@10", "candidates"]\ndirections = ["maximize"]\n',
     9, "search.directions", "one per objective"),
    (MINIMAL + '[finetune]\nsplit = "train"\n', 8, "finetune.split",
     "got 'train': a split the sweep scores"),
    (MINIMAL + 'reader_options = { api_key = "x" }\n' + CHUNKING, 7, "reader_options.api_key",
     "a secret does not belong in a spec"),
    (MINIMAL + "[baseline]\nfoo = 1\n", 8, "baseline.foo", "unknown key(s) ['foo']"),
    (MINIMAL + '[baseline]\nchunker_id = "whole"\n', 8, "baseline.chunker_id",
     "chunking and selection keys need a pipeline sweep"),
    (MINIMAL + CHUNKING + '[baseline]\npolicy = "R2_POLICY_V1"\n', 10, "baseline.policy",
     "selection key(s) ['policy'] need [grid.selection]"),
    (MINIMAL + CHUNKING + '[grid.selection]\npolicy = ["R2_POLICY_V1"]\nmax_chunks = [0]\n',
     11, "grid.selection.max_chunks", "got 0: "),
    (MINIMAL + "[cv]\nfolds = 3\nseed = -1\n", 9, "cv.seed", "got -1: out of range"),  # QA 26
    (MINIMAL + '[search]\nstrategy = "random"\nn = 2\nseed = -3\n', 10, "search.seed",
     "got -3: out of range"),
    (MINIMAL + 'pipeline = "bm25 >> rm3 >> bm25"\n[grid.stages.rm3]\nfb_terms = [10, 0]\n', 9,
     "grid.stages.rm3.fb_terms[1]", "got 0: "),  # QA 25: the axis value refused, by index
    (MINIMAL + 'pipeline = "bm25 >> cross_encoder"\n[stages.cross_encoder]\n'
     'model = "finetune"\n', None, "finetune_reranker",
     'a cross_encoder stage has model = "finetune", and nothing trains it'),
])
def test_a_spec_error_names_its_field_and_line(tmp_path, text, line, field, words):
    path = write(tmp_path, text)
    with pytest.raises(SweepSpecError) as err:
        load_spec(path)
    said = str(err.value)
    where = f"{path}:{line}" if line is not None else str(path)
    assert said.startswith(f"{where}: field {field!r}: "), said
    assert words in said and "\n" not in said and "(spec)" not in said, said


def _splits(tune: str, report: str) -> str:
    """MINIMAL with these splits (TOML basic strings: ``\\n`` is a line break)."""
    return MINIMAL.replace('tune_split = "train"', f'tune_split = "{tune}"').replace(
        'report_split = "test"', f'report_split = "{report}"')


@pytest.mark.parametrize(("tune", "report", "line", "field", "words"), [
    ("test:0/2", "test:00/2", 5, "report_split", "got 'test:00/2': derived split 'test:00/2' "
                                                 "is not <split>:<i>/<n> with i and n in the "
                                                 "digits 0-9, no leading zero"),
    ("test:0/2", "test:0/2\\n", 5, "report_split", "got 'test:0/2\\n': derived split"),
    ("test:\u0660/2", "test:1/2", 4, "tune_split", "got 'test:\u0660/2': derived split"),
    ("test", "test:0/2", 5, "report_split",
     "got 'test:0/2': can hold queries of tune_split = 'test' (the same split's queries, in "
     "parts that meet), which would be reported on as held out: report on another split, or "
     "on a part disjoint from the tuning one"),
    ("test:0/2", "test", 5, "report_split", "can hold queries of tune_split = 'test:0/2'"),
    ("test:0/2", "test:0/4", 5, "report_split", "can hold queries of tune_split = 'test:0/2'"),
    ("test:0/2", "test:0/3", 5, "report_split", "can hold queries of tune_split = 'test:0/2'"),
])
def test_a_report_split_that_can_hold_a_tuning_query_is_refused(tmp_path, tune, report, line,
                                                                field, words):
    """QA s7 D1: ``tune_split = "test:0/2"``, ``report_split = "test:00/2"`` passed the check
    that the two differ (it compared the names) and reported the tuning queries as held out;
    a report split over the tuning split's queries (``test`` against ``test:0/2``) or parts
    that meet (``test:0/2`` against ``test:0/4``) passed too. Each is one located error."""
    path = write(tmp_path, _splits(tune, report))
    with pytest.raises(SweepSpecError) as err:
        load_spec(path)
    said = str(err.value)
    where = f"{path}:{line}" if line is not None else str(path)
    assert said.startswith(f"{where}: field {field!r}: "), said
    assert words in said and "(spec)" not in said, said


@pytest.mark.parametrize(("tune", "report"), [
    ("test:0/2", "test:1/2"), ("test:1/4", "test:0/2"), ("test:0/3", "test:1/3"),
    ("train", "test:0/2"), ("test:1/2", "train")])
def test_report_splits_apart_from_the_tuning_one_load(tmp_path, tune, report):
    spec = load_spec(write(tmp_path, _splits(tune, report)))
    assert (spec.tune_split, spec.report_split) == (tune, report)


def test_the_sweep_command_refuses_an_aliased_report_split_before_any_work(tmp_path):
    """The QA spec (tune on ``test:0/2``, report on ``test:00/2``) ran, reporting identical
    tune and report numbers as held out; now one ``error:`` line, exit 2, nothing written."""
    from typer.testing import CliRunner

    from aiblox.cli.main import app

    path = write(tmp_path, _splits("test:0/2", "test:00/2"))
    db = tmp_path / "s.duckdb"
    result = CliRunner().invoke(app, ["sweep", str(path), "--db", str(db), "--cache-dir",
                                      str(tmp_path / "cache"), "--tracking-uri",
                                      f"sqlite:///{tmp_path / 'mlruns.db'}"],
                                env={"AIBLOX_NO_PROGRESS": "1"})
    assert result.exit_code == 2, result.output
    errors = [x for x in result.output.splitlines() if x.startswith("error:")]
    assert errors == [f"error: {path}:5: field 'report_split': got 'test:00/2': derived split "
                      f"'test:00/2' is not <split>:<i>/<n> with i and n in the digits 0-9, no "
                      f"leading zero (e.g. 'test:0/2')"], result.output
    assert not db.exists() and not (tmp_path / "cache").exists()
    assert not (tmp_path / "mlruns.db").exists()
