"""The builder version names the builder's output: one ``(build_version, input, policy)`` gives
one bundle, and so one ``bundle_id`` (the evidence bundles seed: ids "stable for the same inputs
and policy"; aiblox derives ``bundle_id`` from the content and ``build_version``).

Pinned here: a redacted bundle of one input whose secrets only the redactors of
``a9f84c0`` catch (a Unicode email, a card number grouped by dots, a short ``password=``
value, an ``Authorization: Basic`` header). Before that commit the builder, at ``2.0``, kept
them and gave bundle ``62ad0c0f-...``; after it, still at ``2.0``, it redacted them and gave
``b11f114a-...``: two bundles under one version and input. ``EVIDENCE_BUILD_VERSION`` was 2.1
since (this bundle ``41099c52-...``). 2.2 redacts environment-variable secrets
(``DB_PASSWORD=...``, ``GITHUB_TOKEN=...``), which 2.1 kept (bundle ``7f6e8d61-...`` of the
second input). 2.3 redacts a quoted value whole, spaces included, where 2.2 redacted its first
word and kept the rest (``password="[REDACTED:api_key] horse battery staple"``, bundle
``86d2da6a-...`` of the third input); the first two inputs give the same content as at 2.2 (their
ids change with the version only). 2.4 redacts a SQL cell before cutting it to
``max_cell_chars``, where 2.3 cut it first and kept the head of a secret across the cut
(``contact jonathan.private@exa…``, bundle ``6ede4eb8-...`` of the fourth input); the three text
inputs give the same content as at 2.3. If this test fails because the builder's output
changed on purpose, bump ``EVIDENCE_BUILD_VERSION`` (``aiblox/bundles/models.py``) and pin the
new id and version here, with the reason.
"""

from __future__ import annotations

from aiblox.bundles import EVIDENCE_BUILD_VERSION, EvidencePolicy, build_evidence_bundle

TEXT = ("Contact josé@example.com; card 4111.1111.1111.1111; password=hunter2\n"
        "Authorization: Basic dXNlcjpwYXNz\n")
ENV = "DB_PASSWORD=hunter22\nexport GITHUB_TOKEN=abcd1234efgh\n"
# the ids this input had at build version 2.0: before the redaction change, and after it
IDS_AT_2_0 = {"62ad0c0f-fa68-5d1e-85ea-cd643feef66e", "b11f114a-5eee-5b97-9d5e-2887f6f3c23a"}
IDS_AT_2_1 = {"41099c52-2454-5474-aea2-213294503655", "7f6e8d61-419f-55e0-a934-3977be0043a6"}
IDS_AT_2_2 = {"105615d4-0abc-5e25-9d6e-17cbd08f70cb", "cd7836c3-1b9b-5ce5-9246-08ade376dfbe",
              "86d2da6a-4093-5cd4-b853-bfe3b5a91d9d"}
IDS_AT_2_3 = {"26bcac87-790b-5a4c-9b4d-36fdab5ae03e", "7d1ae8aa-ba7d-5e45-bbf7-55f340288990",
              "efddeff7-f4f2-541e-9fa0-160d1adf7315", "6ede4eb8-d5e0-5cc0-9548-979b5f49161a"}
QUOTED = 'password="correct horse battery staple"\n'
CELL = "x" * 170 + " contact jonathan.private@examplecorp.com now"


def _redacted(text):
    return build_evidence_bundle(
        {"extra_params": {"evidence": [{"text": text, "source_uri": "job"}]}}, None,
        EvidencePolicy(enable_redaction=True), None)


def test_a_redacted_bundle_is_pinned_with_its_build_version():
    bundle = _redacted(TEXT)
    assert [i.content for i in bundle.items] == [
        "Contact [REDACTED:email]; card [REDACTED:card]; password=[REDACTED:api_key]\n"
        "Authorization: Basic [REDACTED:api_key]\n"]
    assert [i.evidence_id for i in bundle.items] == ["inline:0"]  # names, not content
    assert (EVIDENCE_BUILD_VERSION, bundle.build_version) == ("2.4", "2.4")
    assert bundle.bundle_id == "75d6e780-48cc-5385-b806-ceb5792dc77d"
    assert bundle.bundle_id not in IDS_AT_2_0 | IDS_AT_2_1 | IDS_AT_2_2 | IDS_AT_2_3
    env = _redacted(ENV)
    assert [i.content for i in env.items] == [
        "DB_PASSWORD=[REDACTED:api_key]\nexport GITHUB_TOKEN=[REDACTED:api_key]\n"]
    assert env.bundle_id == "9f9f0f8f-d480-5328-a8e8-7444fc919916"
    quoted = _redacted(QUOTED)
    assert [i.content for i in quoted.items] == ['password="[REDACTED:api_key]"\n']
    assert quoted.bundle_id == "774ab86c-6f99-5407-9729-d3d94ede17ef"
    cell = build_evidence_bundle(
        evidence_refs={"sql_results": [{"query_key": "q", "columns": ["note"], "rows": [[CELL]]}]},
        policy=EvidencePolicy(enable_redaction=True))
    assert cell.items[0].content.splitlines()[-1] == (
        "| 1 | " + "x" * 170 + " contact [REDACTED:email] now |")
    assert cell.bundle_id == "115f8241-f88a-5c10-a0be-ff5accf51961"
    assert {env.bundle_id, quoted.bundle_id, cell.bundle_id}.isdisjoint(IDS_AT_2_2 | IDS_AT_2_3)
