"""A sweep is its settings over its data: how the spec spells where the data and the store lie,
its description and the order of its metrics are not part of its hash.

QA: specs differing only in ``dataset = "/work/shared/datasets/adi"``, the same with a trailing
slash, ``"adi"``, an added ``db = "x.duckdb"`` or ``description = "note"`` got other sweep
hashes: a new MLflow parent run each, and every point's manifest hash differed (it holds the
sweep hash), though :attr:`PointManifest.manifest_hash` leaves the dataset's path out because
it names this machine's folders; ``aiblox sweep a.toml --db a.duckdb`` kept the hash that
``db =`` in the spec changed. The data is named by its content hash (tag
``aiblox.dataset_hash``, with the spec's hash what finds the parent; every manifest)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from spec_text import write
from typer.testing import CliRunner

from aiblox.cli.main import app
from aiblox.sweep import SweepSpec, load_spec

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "datasets" / "sample"

SPEC = """
name = "{name}"
{head}
tune_split = "train"
report_split = "test"
embedder = "hashing"
metrics = {metrics}
[base]
top_k_items = 10
fts = {{ top_k = 10 }}
vector = {{ top_k = 10 }}
[grid]
blend = ["rrf"]
rrf_k = [10, 60]
"""


def _spec(head: str, metrics: str = '["ndcg@10", "recall@10"]', name: str = "spelled") -> str:
    return SPEC.format(head=head, metrics=metrics, name=name)


def _spellings(tmp_path: Path) -> dict[str, str]:
    link = tmp_path / "sample_link"
    if not link.is_symlink():
        link.symlink_to(SAMPLE, target_is_directory=True)
    return {"absolute": f'dataset = "{SAMPLE}"', "slash": f'dataset = "{SAMPLE}/"',
            "name": 'dataset = "sample"', "link": f'dataset = "{link}"',
            "db": f'dataset = "sample"\ndb = "{tmp_path / "x.duckdb"}"',
            "description": 'dataset = "sample"\ndescription = "a note"'}


def test_where_the_data_lies_and_free_text_leave_the_hash(tmp_path):
    hashes = {}
    for label, head in _spellings(tmp_path).items():
        (tmp_path / label).mkdir()
        hashes[label] = load_spec(write(tmp_path / label, _spec(head))).hash
    assert len(set(hashes.values())) == 1, hashes
    plain = load_spec(write(tmp_path, _spec('dataset = "sample"')))
    data = plain.model_dump(mode="json")
    # the metrics' order is how they are shown; the settings still count
    assert SweepSpec.model_validate({**data, "metrics": ["recall@10", "ndcg@10"]}).hash == \
        plain.hash
    for changed in ({"name": "other"}, {"experiment": "elsewhere"}, {"embedder": "minilm"},
                    {"metrics": ["ndcg@10"]}, {"backend": "postgres",
                                               "db": "postgresql+psycopg://u@h/d"}):
        assert SweepSpec.model_validate({**data, **changed}).hash != plain.hash, changed


def _sweep(spec: Path, uri: str, db: str, cache: Path) -> dict:
    r = CliRunner().invoke(app, ["sweep", str(spec), "--db", db, "--cache-dir", str(cache),
                                 "--tracking-uri", uri, "--json"],
                           env={"AIBLOX_NO_PROGRESS": "1"})
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


@pytest.mark.parametrize("label", ["slash", "link", "description"])
def test_a_spec_spelled_otherwise_is_the_same_sweep(tmp_path, label, sweep_db, mlflow_uri):
    """The same sweep run again from a spec that spells its data otherwise (a symlink too, whose
    store is the folder's) resumes the one parent, logs nothing and gives every point the
    manifest hash it had; the metrics listed in another order too."""
    name = f"spelled_{label}"
    first = write(tmp_path, _spec(f'dataset = "{SAMPLE}"', name=name))
    (tmp_path / "again").mkdir()
    again = write(tmp_path / "again", _spec(_spellings(tmp_path)[label],
                                            '["recall@10", "ndcg@10"]', name))
    cache = tmp_path / "stages"
    a, b = _sweep(first, mlflow_uri, sweep_db, cache), _sweep(again, mlflow_uri, sweep_db, cache)
    assert b["sweep_hash"] == a["sweep_hash"]
    assert b["tracking"]["parent_run_id"] == a["tracking"]["parent_run_id"]
    assert b["tracking"]["logged"] == 0 and b["computed"] == {}
    assert {p["config_hash"]: p["manifest_hash"] for p in b["leaderboard"]} == \
        {p["config_hash"]: p["manifest_hash"] for p in a["leaderboard"]}
