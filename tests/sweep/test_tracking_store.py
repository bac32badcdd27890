"""A relative ``sqlite:///`` tracking URI names the database of the folder it is used in, every
time: MLflow keeps one store per URI string for the process, so the URI opened again after a
``chdir`` (a notebook's, a test's) read and wrote the first folder's database."""

from __future__ import annotations

from aiblox.engine.tracking import opened_uri, tracking_client

URI = "sqlite:///mlruns/mlflow.db"


def test_a_relative_sqlite_uri_follows_the_working_folder(tmp_path, monkeypatch) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    monkeypatch.chdir(tmp_path / "a")
    tracking_client(URI, create=True).create_experiment("made-in-a")
    monkeypatch.chdir(tmp_path / "b")
    names = {e.name for e in tracking_client(URI, create=True).search_experiments()}
    assert "made-in-a" not in names
    monkeypatch.chdir(tmp_path / "a")
    assert "made-in-a" in {e.name for e in tracking_client(URI).search_experiments()}


def test_only_a_relative_sqlite_uri_is_made_absolute(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    db = (tmp_path / "mlruns" / "mlflow.db").resolve().as_posix()
    assert opened_uri(URI) == f"sqlite:///{db}"
    assert opened_uri(URI + "?timeout=5") == f"sqlite:///{db}?timeout=5"
    for uri in (f"sqlite:///{db}", "http://127.0.0.1:5000", "sqlite:///:memory:",
                "file:///tmp/store"):
        assert opened_uri(uri) == uri
