"""A PostgreSQL URL is never shown with its password (README: "Errors name the URL with the
password masked"): not in errors, where libpq's ``?password=`` query parameter went through in
clear (SQLAlchemy's masking covers the userinfo only), nor in what ``aiblox ingest``,
``aiblox answer`` and ``aiblox pack list`` print (QA audit)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from aiblox.cli.main import app
from aiblox.stores import mask_password

runner = CliRunner()
ENV = {"AIBLOX_NO_PROGRESS": "1"}
SECRET = "S3CRETPW"


@pytest.mark.parametrize(
    ("url", "masked"),
    [
        ("postgresql+psycopg://postgres@/db?host=/tmp/x&password=S3CRETPW",
         "postgresql+psycopg://postgres@/db?host=/tmp/x&password=***"),
        ("postgresql://u:S3CRETPW@h:5432/db?sslpassword=S3CRETPW&sslmode=require",
         "postgresql://u:***@h:5432/db?sslpassword=***&sslmode=require"),
        ("postgres://u@h/db?PASSWORD=S3CRETPW#x", "postgres://u@h/db?PASSWORD=***#x"),
        ("data/password=x.duckdb", "data/password=x.duckdb"),  # a path: as given
    ],
)
def test_passwords_in_the_userinfo_and_the_query_are_masked(url, masked):
    pytest.importorskip("sqlalchemy")
    from aiblox.stores.postgres import mask_url

    assert mask_password(url) == masked
    if "://" in url:
        assert SECRET not in mask_url(url) and "***" in mask_url(url)


def test_an_unreachable_store_is_named_without_its_query_password(tmp_path):
    db = f"postgresql+psycopg://postgres@/nonexist?host={tmp_path / 'nosock'}&password={SECRET}"
    r = runner.invoke(app, ["search", "foo", "--mode", "bm25", "--db", db], env=ENV)
    assert r.exit_code == 2 and "cannot open store" in r.output
    assert SECRET not in r.output and "password=***" in r.output


def test_printed_store_urls_hide_the_password(pg_admin_url):
    """The ingest line and its --json "db", the answer's `pack show` hint and the `pack list`
    title printed the password of a user:password@ URL (the throwaway server trusts its local
    connections, so any password opens it; a server that checks one gets its own)."""
    from aiblox.stores.postgres import scratch_database

    with scratch_database(pg_admin_url) as url:
        secret = url.password or SECRET
        userinfo = url.set(password=secret).render_as_string(hide_password=False)
        query = url.set(password=None).update_query_dict({"password": secret})
        in_query = query.render_as_string(hide_password=False)
        outputs = []
        for args in (["ingest", "sample", "--db", userinfo, "--embedder", "hashing"],
                     ["ingest", "sample", "--db", in_query, "--embedder", "hashing", "--json"],
                     ["answer", "what is bm25?", "--db", userinfo, "--embedder", "hashing"],
                     ["pack", "list", "--db", userinfo]):
            r = runner.invoke(app, args, env=ENV)
            assert r.exit_code == 0, r.output
            outputs.append("".join(r.output.split()))  # a long line folded: joined again
        assert not [o for o in outputs if secret in o]
        assert "***@" in outputs[0]
        assert json.loads(outputs[1])["db"].endswith("password=***")
        assert "--dbpostgresql+psycopg://" in outputs[2] and ":***@" in outputs[2]
        assert ":***@" in outputs[3]


def test_every_url_in_a_message_is_masked_by_one_rule():
    """One function masks store URLs, CLI error lines and LLM settings errors; the CLI's error
    masking took only the userinfo's password, not a ``?password=``."""
    from aiblox.inputs import mask_url_passwords

    text = ("could not connect 'postgresql+psycopg://u:pw1@h/db?host=/x&password=pw2&sslmode=x'"
            " then http://me:pw3@host:1/v1 and ?SSLPASSWORD=pw4")
    masked = mask_url_passwords(text)
    assert not any(f"pw{i}" in masked for i in range(1, 5))
    assert masked == ("could not connect 'postgresql+psycopg://u:***@h/db?host=/x&password=***"
                      "&sslmode=x' then http://me:***@host:1/v1 and ?SSLPASSWORD=***")
    from aiblox.cli._errors import _masked

    assert _masked(text) == masked


def test_a_driver_error_keeps_its_words_and_loses_only_passwords(pg_admin_url):
    """A PostgreSQL error replaced every occurrence of the password in the driver's text: with
    password ``x``, ``server closed the connection une***pectedly``. Only a URL's or a
    connection string's password is masked now, the words are as the driver wrote them."""
    from sqlalchemy import text

    from aiblox.stores import StoreError
    from aiblox.stores.postgres import PostgresStore, scratch_database

    with scratch_database(pg_admin_url) as url:
        secret = url.password or "x"  # a server that checks passwords: its own
        store = PostgresStore(url.set(password=secret))
        try:
            word = f"unexpectedly_{secret}_missing"  # the password inside ordinary words
            with pytest.raises(StoreError) as exc, store.db_errors("read"), \
                    store.engine.connect() as conn:
                conn.execute(text(f'SELECT * FROM "{word}"'))
        finally:
            store.close()
    message = str(exc.value)
    assert f'relation "{word}" does not exist' in message
    assert f":{secret}@" not in message and ":***@" in message  # the store's URL: masked


@pytest.mark.parametrize(("text", "masked"), [
    ("could not connect: host=h port=5432 password=hunter2 dbname=x",
     "could not connect: host=h port=5432 password=*** dbname=x"),
    ("invalid dsn: \"host=h password='a b' sslpassword = k\"",
     "invalid dsn: \"host=h password=*** sslpassword = ***\""),
    ("server closed the connection unexpectedly", "server closed the connection unexpectedly"),
    ("cannot open data/password=x.duckdb", "cannot open data/password=x.duckdb"),
])
def test_a_connection_strings_password_is_masked_and_nothing_else(text, masked):
    from aiblox.inputs import has_url_password, mask_url_passwords

    assert mask_url_passwords(text) == masked
    assert has_url_password(text) == (text != masked)
