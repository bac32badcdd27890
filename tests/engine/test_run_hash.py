"""The run hash is the sha256 of the run's canonical JSON ``{qid: [[doc, score], ...]}`` (scores
as a TREC file carries them), written directly rather than through ``json.dumps``: held here to
the definition, on runs with the ids and scores that could make the two differ."""

from __future__ import annotations

import random

import pytest

from aiblox.data.trec import trec_scores
from aiblox.engine.result import run_hash
from aiblox.hashing import canonical_json, sha256_text


def reference(run):
    return sha256_text(canonical_json(
        {q: [[h[0], s] for h, s in zip(hits, trec_scores([h[1] for h in hits]), strict=True)]
         for q, hits in sorted(run.items()) if hits}))


IDS = ["d1", "d10", "d2", 'quo"te', "back\\slash", "tab\there", "new\nline", "\x00nul", "é",
       "日本", "emoji😀", "\u2028sep", "", " ", "\x7f", "\u00ad"]


@pytest.mark.parametrize("seed", range(40))
def test_the_run_hash_is_the_canonical_json_s(seed):
    rng = random.Random(seed)
    run = {}
    for _ in range(rng.randint(0, 6)):
        hits = []
        for _ in range(rng.randint(0, 8)):
            score = rng.choice([rng.uniform(-5, 5), 1.0, 0.5, 1e-300, -0.0, 3, 1e30, 0.1 + 0.2])
            hits.append((rng.choice(IDS), score))
        hits.sort(key=lambda h: -h[1])  # ties kept: trec_scores makes them decrease
        run[rng.choice(IDS + ["q1", "q2"])] = hits
    assert run_hash(run) == reference(run)


def test_ids_of_another_type_take_json_s_route():
    run = {"q": [(7, 1.0), ("d", 0.5)]}  # an int id: json writes 7, not "7"
    assert run_hash(run) == reference(run)
    assert run_hash({"q": [("7", 1.0), ("d", 0.5)]}) != run_hash(run)


def test_non_finite_and_empty():
    assert run_hash({}) == reference({}) == run_hash({"q": []})
    with pytest.raises(ValueError):
        run_hash({"q": [("d", float("inf"))]})
