"""``aiblox answer --llm openai`` in a real process against a real HTTP server on 127.0.0.1: a
failed generation exits 1 with one line after printing its data, and the API key reaches the
server and nothing else (stdout, stderr with every logger at DEBUG, the stored evidence pack,
the store file)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

pytest.importorskip("httpx", reason="the openai LLM needs the 'llm' extra (httpx)")

from aiblox.cli.main import app  # noqa: E402
from aiblox.evidence import pack_from_json, verify_pack  # noqa: E402
from aiblox.stores import DuckDBStore  # noqa: E402
from tests.chat_server import ChatServer  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
Q = "Who developed the probabilistic relevance framework behind BM25?"
KEY = "sk-aiblox-test-KEY-7f3a9c1e5b2d4680"
# every logger at DEBUG (httpx, httpcore, aiblox), then the CLI as `aiblox` runs it; numba's
# compiler, which logs the tracebacks of the typings it tries while compiling a kernel (a fresh
# numba cache), stays at WARNING
DRIVER = ("import logging, sys; logging.basicConfig(level=logging.DEBUG); "
          "logging.getLogger('numba').setLevel(logging.WARNING); "
          "from aiblox.cli.main import app; app(sys.argv[1:], prog_name='aiblox')")





@pytest.fixture(scope="module")
def db(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("answer_llm") / "s.duckdb")
    r = CliRunner().invoke(app, ["ingest", "sample", "--db", path, "--embedder", "hashing"],
                           env={"AIBLOX_NO_PROGRESS": "1"})
    assert r.exit_code == 0, r.output
    return path


@pytest.fixture
def failing() -> Iterator[ChatServer]:
    s = ChatServer(500)
    yield s
    s.close()


@pytest.fixture
def answering() -> Iterator[ChatServer]:
    s = ChatServer(200, "Robertson and Sparck Jones. [C0]")
    yield s
    s.close()


def answer(server: ChatServer | str, db: str, *extra: str,
           **variables: str) -> subprocess.CompletedProcess[str]:
    """``aiblox answer --llm openai`` against ``server`` (or a base URL), in a real process;
    ``variables`` set (or override) environment variables."""
    url = server if isinstance(server, str) else server.url
    env = {**os.environ, "AIBLOX_NO_PROGRESS": "1", "AIBLOX_LLM_BASE_URL": url,
           "AIBLOX_LLM_MODEL": "test-model", "AIBLOX_LLM_API_KEY": KEY,
           "AIBLOX_LLM_MAX_ATTEMPTS": "2", "AIBLOX_LLM_TIMEOUT_S": "10",
           "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH"))
                                         if p), **variables}
    return subprocess.run(
        [sys.executable, "-c", DRIVER, "answer", Q, "--db", db, "--embedder", "hashing",
         "--llm", "openai", "--retrieved-at", "2024-01-15T10:30:00Z", *extra],
        capture_output=True, text=True, env=env, cwd=REPO, timeout=300)


def stored_pack_json(db: str, pack_id: str) -> str:
    with DuckDBStore(db) as store:
        row = store.get_evidence_pack(pack_id)
    assert row is not None
    return str(row["json"])


def assert_no_key(*texts: str | bytes) -> None:
    for t in texts:
        data = t.encode() if isinstance(t, str) else t
        assert KEY.encode() not in data
        assert KEY[-16:].encode() not in data  # nor a tail of it


def test_a_failed_generation_prints_its_data_and_exits_1(failing, db):
    r = answer(failing, db, "--json")
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr
    out = json.loads(r.stdout)  # the data is printed all the same: FAILED is data
    assert out["llm_result"]["generation_status"] == "FAILED"
    assert out["llm_result"]["failure_reason"] == "transient failure after 2 attempts: HTTP 500"
    assert out["validation"]["validation_status"] == "FAILED"
    last = r.stderr.strip().splitlines()[-1]
    assert last == (f"error: generation failed (openai test-model at {failing.url}): transient "
                    f"failure after 2 attempts: HTTP 500; evidence pack {out['pack_id']}")
    # the pack was stored and records the failed call
    pack = pack_from_json(stored_pack_json(db, out["pack_id"]))
    assert verify_pack(pack) == [] and pack.decision.status == "FAILED"
    assert pack.tool_calls[-1].status == "failed"
    # the key went where it belongs, and only there
    assert failing.auth == [f"Bearer {KEY}"] * 2
    assert_no_key(r.stdout, r.stderr, stored_pack_json(db, out["pack_id"]))

    table = answer(failing, db)  # the people's output: same exit, same one line
    assert table.returncode == 1 and "Traceback" not in table.stderr
    assert table.stderr.strip().splitlines()[-1].startswith("error: generation failed (openai")
    assert "evidence pack: pack_" in table.stdout  # results on stdout, the error on stderr
    assert_no_key(table.stdout, table.stderr)


def test_a_generated_answer_exits_0_and_the_key_stays_out(answering, db):
    r = answer(answering, db, "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["llm_result"]["generation_status"] == "OK"
    assert out["validation"]["validation_status"] == "PASSED", out["validation"]
    assert answering.auth == [f"Bearer {KEY}"]
    exported = Path(db).parent / "pack.html"
    e = subprocess.run([sys.executable, "-c", DRIVER, "pack", "export", out["pack_id"], "--db",
                        db, "--format", "html", "--out", str(exported)],
                       capture_output=True, text=True, cwd=REPO,
                       env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120)
    assert e.returncode == 0, e.stderr
    assert_no_key(r.stdout, r.stderr, stored_pack_json(db, out["pack_id"]),
                  exported.read_bytes(), Path(db).read_bytes())


def test_an_answer_cut_off_by_the_token_limit_is_refused_and_recorded(db):
    """The endpoint says the answer stopped at the reserved tokens (finish_reason length): a
    cited half sentence is not shown as an answer; the pack records what came (QA 19)."""
    server = ChatServer(200, "General libraries have different retrieval problems than [C0]",
                        finish_reason="length")
    try:
        r = answer(server, db, "--json")
    finally:
        server.close()
    out = json.loads(r.stdout)
    assert out["llm_result"]["generation_status"] == "OK"
    assert out["llm_result"]["finish_reason"] == "length"
    assert out["validation"]["validation_status"] == "FAILED"
    assert out["validation"]["failure_codes"] == ["CUT_OFF"]
    assert (out["decision"]["kind"], out["decision"]["status"]) != ("answer", "OK")
    pack = pack_from_json(stored_pack_json(db, out["pack_id"]))
    assert verify_pack(pack) == [] and pack.decision.status == "FAILED"
    assert "cut off" in (pack.decision.text or "") + json.dumps(pack.decision.model_dump())


def _packs(db: str) -> list[str]:
    with DuckDBStore(db) as store:
        return [str(p["pack_id"]) for p in store.list_evidence_packs()]


def _free_port() -> int:
    """A port on 127.0.0.1 where nothing listens (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(("variable", "value", "expected"), [
    ("AIBLOX_LLM_BASE_URL", "notaurl", "an http:// or https:// URL with a host"),
    ("AIBLOX_LLM_BASE_URL", "http://127.0.0.1:port/v1", "an http:// or https:// URL with a host"),
    ("AIBLOX_LLM_MAX_ATTEMPTS", "abc", "a whole number from 1 to 10"),
    ("AIBLOX_LLM_TIMEOUT_S", "0", "a finite number of seconds > 0"),
])
def test_a_malformed_variable_is_one_error_line_before_any_work(db, variable, value, expected):
    before = _packs(db)
    r = answer("http://127.0.0.1:9/v1", db, **{variable: value})
    assert r.returncode == 2, r.stderr
    assert [ln for ln in r.stderr.splitlines()
            if ln.startswith(("error", "warning", "WARNING", "ERROR", "CRITICAL"))] == [
        f"error: environment variable {variable}={value!r}: expected {expected}"
        + (", e.g. https://api.openai.com/v1" if variable == "AIBLOX_LLM_BASE_URL" else "")]
    assert r.stdout == "" and _packs(db) == before  # nothing retrieved, nothing stored


def test_an_unreachable_url_is_a_failed_generation_stored_and_named(db):
    """A well-formed URL where nothing listens: the call FAILED is data (the pack is stored),
    and the one error line names the URL."""
    url = f"http://127.0.0.1:{_free_port()}/v1"
    r = answer(url, db, "--json")
    assert r.returncode == 1, r.stderr
    out = json.loads(r.stdout)
    assert out["llm_result"]["generation_status"] == "FAILED"
    assert out["llm_result"]["attempts"] == 2
    reason = out["llm_result"]["failure_reason"]
    assert reason.startswith("transient failure after 2 attempts: ConnectError")
    lines = [ln for ln in r.stderr.splitlines()  # the driver logs every logger at DEBUG
             if ln.startswith(("error", "warning", "WARNING", "ERROR", "CRITICAL"))]
    assert lines == [f"error: generation failed (openai test-model at {url}): {reason}; "
                     f"evidence pack {out['pack_id']}"]
    assert out["pack_id"] in _packs(db)
    pack = pack_from_json(stored_pack_json(db, out["pack_id"]))
    assert verify_pack(pack) == [] and pack.tool_calls[-1].status == "failed"


def test_a_key_with_a_carriage_return_is_refused_without_showing_it(answering, db):
    """A trailing CR (a pasted key, a .env with CRLF) made an illegal header whose error quoted
    the key in the error line, the --json output and the stored pack."""
    before = _packs(db)
    r = answer(answering, db, "--json", AIBLOX_LLM_API_KEY=KEY + "\r")
    assert r.returncode == 2, r.stderr
    lines = [ln for ln in r.stderr.splitlines()
             if ln.startswith(("error", "warning", "WARNING", "ERROR", "CRITICAL"))]
    assert lines == ["error: environment variable AIBLOX_LLM_API_KEY=(the value, not shown): "
                     "expected an API key of printable ASCII characters, without spaces or "
                     "control characters (a trailing newline or carriage return?)"]
    assert r.stdout == "" and _packs(db) == before and answering.auth == []
    assert_no_key(r.stdout, r.stderr)


def test_a_lone_surrogate_in_the_answer_is_a_failed_generation_with_its_pack(db):
    """``"BM25 \\ud800 [C0]"`` is valid JSON but not UTF-8: hashing the answer raised, read as
    the user's input ('text that is not valid Unicode', exit 2, no pack stored)."""
    server = ChatServer(200, "BM25 \ud800 [C0]")
    try:
        r = answer(server, db, "--json")
    finally:
        server.close()
    assert r.returncode == 1, r.stderr
    out = json.loads(r.stdout)
    reason = "malformed response: choices[0].message.content is not valid Unicode (a lone " \
             "surrogate)"
    assert out["llm_result"]["generation_status"] == "FAILED"
    assert out["llm_result"]["failure_reason"] == reason
    assert r.stderr.strip().splitlines()[-1] == (
        f"error: generation failed (openai test-model at {server.url}): {reason}; "
        f"evidence pack {out['pack_id']}")
    pack = pack_from_json(stored_pack_json(db, out["pack_id"]))
    assert verify_pack(pack) == [] and pack.tool_calls[-1].status == "failed"


def test_an_answer_with_terminal_escapes_is_refused_and_never_printed(db):
    """A cited answer carrying escape sequences (retitle, clear, recolour the terminal) passed
    validation and reached stdout raw; a failed answer printed an empty evidence table."""
    server = ChatServer(200, "Robertson and Sparck Jones [C0].\x1b]0;pwned\x07\x1b[2J\x1b[31m"
                             "RED [C0]")
    try:
        r = answer(server, db)
    finally:
        server.close()
    assert "\x1b" not in r.stdout + r.stderr and "pwned" not in r.stdout
    assert "the answer contains the control character U+001B" in r.stdout
    assert "cited evidence" not in r.stdout
