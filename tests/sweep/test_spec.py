"""Sweep specs: validation with file and field in the message, exact expansion of the grid."""

from decimal import Decimal
from pathlib import Path

import pytest
from spec_text import MINIMAL, write

from aiblox.sweep import SweepSpec, SweepSpecError, load_spec

REPO = Path(__file__).resolve().parents[2]
SPECS = REPO / "evals" / "sweeps"


@pytest.mark.parametrize("path", sorted(SPECS.glob("*.toml")), ids=lambda p: p.name)
def test_shipped_specs_load(path):
    spec = load_spec(path)
    assert spec.points()
    assert spec.tune_split != spec.report_split


def test_sample_spec_expands_blend_specific_axes_without_duplicates():
    spec = load_spec(SPECS / "sample_fusion.toml")
    points = spec.points()
    linear = [p for p in points if p.scoring.blend == "linear"]
    rrf = [p for p in points if p.scoring.blend == "rrf"]
    assert len(linear) == 5 * 2 * 1 * 2  # w_text x normalize x missing x depth
    assert len(rrf) == 2 * 2  # rrf_k x depth: linear axes do not multiply RRF points
    assert len({p.model_dump_json() for p in points}) == len(points)
    assert {p.fts.top_k for p in points} == {10, 20} == {p.vector.top_k for p in points}


def test_a_setting_the_blend_does_not_read_leaves_the_points_hashes_and_keys(tmp_path):
    """A base's normalize under RRF (and rrf_k under the linear blend) is no other point: the
    same config hashes and fusion keys as the defaults; the linear points still get it."""
    from aiblox.engine.configs import fusion_config
    from aiblox.engine.evaluate import config_hash
    from aiblox.engine.task import stage_key

    def hashed(base: str) -> list[tuple[str, str, str]]:
        spec = load_spec(write(tmp_path, MINIMAL + base + """
[grid]
blend = ["rrf", "linear"]
w_text = [0.5]
"""))
        return [(p.scoring.blend, config_hash(p, "e", "duckdb")[0],
                 stage_key("fusion", "1", fusion_config(p), ["s"])) for p in spec.points()]

    default = hashed("")
    moved = hashed('[base]\nscoring = { blend = "rrf", normalize = "zscore", rrf_k = 60 }\n')
    assert [h for h in moved if h[0] == "rrf"] == [h for h in default if h[0] == "rrf"]
    assert [h for h in moved if h[0] == "linear"] != [h for h in default if h[0] == "linear"]
    linear_k = hashed('[base]\nscoring = { rrf_k = 10, rrf_w_vec = 2.0 }\n')
    assert [h for h in linear_k if h[0] == "linear"] == [h for h in default if h[0] == "linear"]


def test_w_vec_is_one_minus_w_text_exactly(tmp_path):
    spec = load_spec(write(tmp_path, MINIMAL + """
[grid]
blend = ["linear"]
w_text = { start = 0, stop = 1, step = 0.05 }
"""))
    points = spec.points()
    assert len(points) == 21
    pairs = [(p.scoring.w_text, p.scoring.w_vec) for p in points]
    assert (0.15, 0.85) in pairs and (0.35, 0.65) in pairs and (0.7, 0.3) in pairs
    for wt, wv in pairs:
        assert Decimal(repr(wt)) + Decimal(repr(wv)) == 1


@pytest.mark.parametrize("extra, field", [
    ("bogus = 1\n", "bogus"),
    ("[grid]\nw_txt = [0.5]\n", "grid.w_txt"),
    ("[grid]\nw_text = [1.5]\n", "grid.w_text"),
    ("[grid]\nw_text = { start = 0, stop = 1, step = 0.3 }\n", "grid.w_text"),
    ("[grid]\ndepth = []\n", "grid.depth"),
    ("[base]\nfts = { topk = 5 }\n", "base.fts.topk"),
    ("[baseline]\nblend = \"sum\"\n", "baseline.blend"),
])
def test_bad_specs_name_file_and_field(tmp_path, extra, field):
    path = write(tmp_path, MINIMAL + extra)
    with pytest.raises(SweepSpecError) as err:
        load_spec(path)
    assert str(path) in str(err.value)
    assert field in str(err.value)


def test_tune_and_report_must_differ(tmp_path):
    with pytest.raises(SweepSpecError, match="must differ"):
        load_spec(write(tmp_path, MINIMAL.replace('"test"', '"train"')))


def test_primary_must_be_scored(tmp_path):
    with pytest.raises(SweepSpecError, match="primary"):
        load_spec(write(tmp_path, MINIMAL + 'metrics = ["recall@10"]\n'))


def test_bad_toml_names_the_file(tmp_path):
    path = write(tmp_path, "name = \n")
    with pytest.raises(SweepSpecError, match="not valid TOML") as err:
        load_spec(path)
    assert str(path) in str(err.value)


def test_spec_hash_is_stable_and_sensitive(tmp_path):
    a = load_spec(write(tmp_path, MINIMAL))
    b = SweepSpec.model_validate(a.model_dump())
    assert a.hash == b.hash
    c = SweepSpec.model_validate({**a.model_dump(), "grid": {"rrf_k": [10]}})
    assert c.hash != a.hash
