"""Selection policy files and loader."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from aiblox.assembly import PolicyError, SelectionPolicy, load_policy

REPO = Path(__file__).resolve().parents[2]
POLICIES = REPO / "evals" / "policies"


def test_v1_has_the_seed_snapshot_values() -> None:
    policy = load_policy("R2_POLICY_V1", policies_dir=POLICIES)
    assert policy.policy_version == "R2_POLICY_V1"
    assert policy.max_chunks == 6
    assert policy.max_chunks_per_knowledge_id == 2
    assert policy.max_evidence_tokens == 2200
    assert policy.reserved_output_tokens == 800
    assert policy.max_total_prompt_tokens == 3500
    assert policy.max_chunk_token_ratio == 0.35
    assert policy.overlap_ratio_threshold == 0.80
    assert policy.ordering_mode == "rank_strict"
    assert policy.sanitization_mode == "safe_normalize_v1"
    assert policy.strict_no_evidence is True
    assert policy.per_chunk_token_cap == 770  # int(0.35 * 2200)


def test_v2_is_a_different_valid_policy() -> None:
    v1 = load_policy("R2_POLICY_V1", policies_dir=POLICIES)
    v2 = load_policy("R2_POLICY_V2", policies_dir=POLICIES)
    assert v2.policy_version == "R2_POLICY_V2"
    assert v2.overlap_ratio_threshold < v1.overlap_ratio_threshold
    assert v2.max_evidence_tokens > v1.max_evidence_tokens
    assert v1.sha256() != v2.sha256()


def test_load_by_name_from_cwd_and_by_explicit_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO / "aiblox")  # a sub folder: the loader walks up to evals/policies
    by_name = load_policy("R2_POLICY_V1")
    by_path = load_policy(POLICIES / "R2_POLICY_V1.toml")
    assert by_name == by_path
    assert by_name.sha256() == by_path.sha256()


def test_unknown_key_is_rejected_with_file_and_field(tmp_path: Path) -> None:
    text = (POLICIES / "R2_POLICY_V1.toml").read_text() + "\nmax_chunkz = 3\n"
    path = tmp_path / "R2_POLICY_V1.toml"
    path.write_text(text)
    with pytest.raises(PolicyError) as err:
        load_policy(path)
    assert str(path) in str(err.value)
    assert "max_chunkz" in str(err.value)


def test_bad_value_and_bad_toml_name_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(
        (POLICIES / "R2_POLICY_V1.toml").read_text().replace('"rank_strict"', '"score_desc"')
    )
    with pytest.raises(PolicyError, match="ordering_mode"):
        load_policy(bad)
    # a quoted number is a string, not the number (QA 28: max_chunks = "6" was taken)
    quoted = tmp_path / "quoted.toml"
    quoted.write_text((POLICIES / "R2_POLICY_V1.toml").read_text()
                      .replace('policy_version = "R2_POLICY_V1"', 'policy_version = "quoted"')
                      .replace("max_chunks = 6", 'max_chunks = "6"'))
    with pytest.raises(PolicyError, match=r"quoted\.toml.*max_chunks.*valid integer"):
        load_policy(quoted)
    broken = tmp_path / "broken.toml"
    broken.write_text("policy_version = \n")
    with pytest.raises(PolicyError, match=r"broken\.toml: not valid TOML.*line 1"):
        load_policy(broken)


def test_name_must_match_policy_version(tmp_path: Path) -> None:
    (tmp_path / "R2_POLICY_V9.toml").write_text((POLICIES / "R2_POLICY_V1.toml").read_text())
    with pytest.raises(PolicyError, match="expected 'R2_POLICY_V9'"):
        load_policy("R2_POLICY_V9", policies_dir=tmp_path)
    with pytest.raises(PolicyError, match="not found"):
        load_policy("R2_POLICY_NOPE", policies_dir=tmp_path)


def test_policy_is_frozen_and_budgets_are_checked() -> None:
    policy = load_policy("R2_POLICY_V1", policies_dir=POLICIES)
    with pytest.raises(ValueError):
        policy.max_chunks = 3  # type: ignore[misc]
    with pytest.raises(ValueError, match="reserved_output_tokens"):
        policy.with_updates(reserved_output_tokens=3500)
    assert isinstance(policy.with_updates(max_chunks=3), SelectionPolicy)
    # an evidence budget the total cannot hold with the reserve (8000 + 800 > 3500): one
    # chunk passed the per-chunk cap (0.35 x 8000) that the total then dropped, with every
    # chunk after it, where V1 itself answered
    with pytest.raises(ValueError, match=r"max_evidence_tokens \(8000\) plus "
                                         r"reserved_output_tokens \(800\) exceed "
                                         r"max_total_prompt_tokens \(3500\): set "
                                         r"max_evidence_tokens to at most 2700"):
        policy.with_updates(max_evidence_tokens=8000)
    assert policy.with_updates(max_evidence_tokens=2700).max_evidence_tokens == 2700


@pytest.mark.parametrize(("line", "field"), [("top_similarity_gate = inf", "top_similarity_gate"),
                                             ("min_similarity_score = nan", "min_similarity_score"),
                                             ("max_chunk_token_ratio = nan",
                                              "max_chunk_token_ratio")])
def test_a_policy_file_with_nan_or_inf_is_refused_naming_the_field(tmp_path, line, field):
    text = (POLICIES / "R2_POLICY_V1.toml").read_text(encoding="utf-8")
    key = line.split(" =")[0]
    text = "\n".join(ln for ln in text.splitlines() if not ln.startswith(key + " "))
    path = tmp_path / "R2_POLICY_QA.toml"
    path.write_text(text.replace('"R2_POLICY_V1"', '"R2_POLICY_QA"') + f"\n{line}\n",
                    encoding="utf-8")
    with pytest.raises(PolicyError) as err:
        load_policy(path)
    assert str(path) in str(err.value) and field in str(err.value), err.value
    assert "\n" not in str(err.value)


def test_a_policies_folder_variable_naming_no_folder_is_named(tmp_path, monkeypatch):
    from aiblox.assembly.policy import POLICIES_DIR_ENV

    monkeypatch.setenv(POLICIES_DIR_ENV, str(tmp_path / "nowhere"))
    with pytest.raises(PolicyError) as err:
        load_policy("R2_POLICY_V1")
    assert str(err.value) == (f"policy 'R2_POLICY_V1': environment variable {POLICIES_DIR_ENV}="
                              f"{str(tmp_path / 'nowhere')!r}: expected a folder of policies "
                              f"(<name>.toml); there is no such folder")
    monkeypatch.setenv(POLICIES_DIR_ENV, str(tmp_path))  # a folder, without the file
    with pytest.raises(PolicyError, match="R2_POLICY_V1.toml: policy file not found"):
        load_policy("R2_POLICY_V1")
    monkeypatch.delenv(POLICIES_DIR_ENV)  # the shipped folder: an unknown name lists the known
    with pytest.raises(PolicyError, match=r"NOPE.toml: policy file not found; known: "
                                          r"R2_POLICY_V1, R2_POLICY_V2"):
        load_policy("NOPE")


def test_a_changed_copy_may_not_keep_a_frozen_version_name(tmp_path: Path) -> None:
    """A version names frozen values: a file loaded by path that calls itself R2_POLICY_V1
    but changes a budget is refused, naming the field; an unchanged copy and a renamed
    changed one load."""
    text = (POLICIES / "R2_POLICY_V1.toml").read_text()
    same = tmp_path / "copy.toml"
    same.write_text(text)
    assert load_policy(same, policies_dir=POLICIES) == load_policy(POLICIES / "R2_POLICY_V1.toml")
    original = load_policy(same, policies_dir=POLICIES)
    changed = tmp_path / "mine.toml"
    changed.write_text(text.replace(f"max_chunks = {original.max_chunks}\n",
                                    f"max_chunks = {original.max_chunks + 1}\n"))
    with pytest.raises(PolicyError, match=r"mine\.toml.*'R2_POLICY_V1' is a shipped frozen "
                                          r"policy.*max_chunks \(6 -> 7\)"):
        load_policy(changed, policies_dir=POLICIES)
    renamed = tmp_path / "R2_POLICY_MINE.toml"
    renamed.write_text(changed.read_text().replace('"R2_POLICY_V1"', '"R2_POLICY_MINE"'))
    assert load_policy(renamed, policies_dir=POLICIES).max_chunks == original.max_chunks + 1


def test_the_shipped_versions_are_pinned_in_code() -> None:
    """Every shipped policy file has the values its version's pinned sha256 names (editing a
    shipped file fails here: add a new version instead), and every pinned version ships."""
    from aiblox.assembly.policy import SHIPPED_POLICY_SHA256

    shipped = {p.stem: load_policy(p).sha256() for p in sorted(POLICIES.glob("*.toml"))}
    assert shipped == SHIPPED_POLICY_SHA256


def test_a_local_policies_folder_may_not_change_a_shipped_version(tmp_path, monkeypatch):
    """A local ``evals/policies/R2_POLICY_V1.toml`` with other values replaced the shipped
    policy silently (its results labelled R2_POLICY_V1), and a changed copy by path was
    accepted from that folder, refused from any other (QA): it is refused, by name or by path,
    from wherever it is found, in one line naming the change. The folder's own new versions
    and unchanged copies still load."""
    from aiblox.assembly.policy import POLICIES_DIR_ENV

    monkeypatch.delenv(POLICIES_DIR_ENV, raising=False)
    local = tmp_path / "evals" / "policies"
    local.mkdir(parents=True)
    text = (POLICIES / "R2_POLICY_V1.toml").read_text(encoding="utf-8")
    edited = text.replace("max_chunks = 6\n", "max_chunks = 1\n")
    assert edited != text
    (local / "R2_POLICY_V1.toml").write_text(edited, encoding="utf-8")
    (tmp_path / "mine.toml").write_text(edited, encoding="utf-8")
    shutil.copy(POLICIES / "R2_POLICY_V2.toml", local)  # an unchanged copy
    (local / "R2_POLICY_MINE.toml").write_text(
        edited.replace('"R2_POLICY_V1"', '"R2_POLICY_MINE"'), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    change = "is a shipped frozen policy, and this file changes max_chunks (6 -> 1)"
    for how in ({}, {"policies_dir": local}):
        with pytest.raises(PolicyError) as err:
            load_policy("R2_POLICY_V1", **how)
        assert str(local / "R2_POLICY_V1.toml") in str(err.value) and change in str(err.value)
        assert "\n" not in str(err.value)
    for where in (tmp_path, tmp_path.parent):  # by path: refused from any folder
        monkeypatch.chdir(where)
        with pytest.raises(PolicyError, match=re.escape(change)):
            load_policy(tmp_path / "mine.toml")
    monkeypatch.setenv(POLICIES_DIR_ENV, str(local))
    with pytest.raises(PolicyError, match=re.escape(change)):
        load_policy("R2_POLICY_V1")
    assert load_policy("R2_POLICY_MINE").max_chunks == 1  # a version of the folder's own
    assert load_policy("R2_POLICY_V2") == load_policy(POLICIES / "R2_POLICY_V2.toml")


def test_a_changed_shipped_version_is_refused_without_the_shipped_files(tmp_path, monkeypatch):
    """The pinned sha256 is the check, not the files beside the package (an install without
    the checkout's evals/policies): the error then gives both hashes."""
    from aiblox.assembly import policy as policy_module

    changed = tmp_path / "R2_POLICY_V1.toml"
    changed.write_text((POLICIES / "R2_POLICY_V1.toml").read_text(encoding="utf-8")
                       .replace("max_chunks = 6\n", "max_chunks = 5\n"), encoding="utf-8")
    monkeypatch.setattr(policy_module, "_shipped_policy", lambda version: None)
    with pytest.raises(PolicyError, match=r"'R2_POLICY_V1' is a shipped frozen policy, and this "
                                          r"file has other values \(sha256 [0-9a-f]{12}, frozen "
                                          r"f922cc7ebaec\)"):
        load_policy("R2_POLICY_V1", policies_dir=tmp_path)
