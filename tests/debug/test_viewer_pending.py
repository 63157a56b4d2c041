"""`wink debug` serves its page while it indexes the runs; the API waits for the index.

The target is checked first (a path that is no run is refused before anything is
served); the index is built on a background thread; `/api/info` answers at once, every
other API request once the index is built, and a run that cannot be read is answered
with its error and stops the command.
"""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient
from typer.testing import CliRunner

from tests.debug.test_viewer_index import result, write
from weakincentives.cli import app as wink
from weakincentives.debug import ViewerData, ViewerServer
from weakincentives.debug import _viewer_data as viewer_data
from weakincentives.debug._viewer_app import create_starlette_app
from weakincentives.debug._viewer_cache import open_run_index
from weakincentives.debug._viewer_pending import PendingData
from weakincentives.errors import ViewerError


def get(server: ViewerServer, path: str) -> tuple[int, Any]:
    address, port = server.address
    conn = http.client.HTTPConnection(address, port, timeout=30)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        body = response.read()
        return response.status, json.loads(body) if path.startswith("/api/") else body
    finally:
        conn.close()


@pytest.fixture
def run(tmp_path: Path) -> Path:
    return write(tmp_path, "r", [result("s1"), result("s2", passed=False)])


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """Hold every run's index until the event is set."""
    release = threading.Event()
    original = open_run_index

    def slow(*args: Any, **kwargs: Any) -> Any:
        release.wait(30)
        return original(*args, **kwargs)

    monkeypatch.setattr(viewer_data, "open_run_index", slow)
    yield release
    release.set()


def test_the_page_is_served_while_the_index_is_built(run: Path, held: threading.Event) -> None:
    with ViewerServer(run) as server:
        status, page = get(server, "/")
        assert status == 200 and b"wink debug" in page
        assert get(server, "/api/info") == (
            200, {"target": str(run), "kind": "runs", "runs": ["r"]},
        )  # fmt: skip
        answers: list[tuple[int, Any]] = []
        asking = threading.Thread(target=lambda: answers.append(get(server, "/api/runs/r")))
        asking.start()
        asking.join(0.2)
        assert asking.is_alive() and not answers  # it cannot answer before the index exists
        held.set()
        asking.join(30)
        status, body = answers[0]
        assert status == 200 and [e["n"] for e in body["experiments"]] == [2]
        assert get(server, "/api/info")[1] == ViewerData.open(run, cache=False).info()


def failing(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*args: Any, **kwargs: Any) -> Any:
        raise ViewerError("cannot read results.jsonl: disk on fire")

    monkeypatch.setattr(viewer_data, "open_run_index", fail)


def test_a_run_that_cannot_be_read_is_answered_with_its_error(
    run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    failing(monkeypatch)
    pending = PendingData(run)
    with pytest.raises(ViewerError, match="disk on fire"):
        pending.get(30)
    assert pending.error is not None
    client = TestClient(create_starlette_app(pending), base_url="http://127.0.0.1")
    assert client.get("/api/info").json()["runs"] == ["r"]
    answer = client.get("/api/runs/r")
    assert answer.status_code == 400 and "disk on fire" in answer.text


def test_wink_debug_stops_with_the_error_of_a_run_it_cannot_read(
    run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    failing(monkeypatch)
    outcome = CliRunner().invoke(
        wink, ["debug", str(run), "--port", "0", "--no-open"], env={"COLUMNS": "500"}
    )
    assert outcome.exit_code == 2, outcome.output  # as before, when it indexed first
    assert "disk on fire" in outcome.output
    assert "http://127.0.0.1:" in outcome.output  # it was served meanwhile


def test_a_target_that_is_no_run_is_refused_before_serving(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(ViewerError, match="holds no runs"):
        ViewerServer(tmp_path / "empty")
    with pytest.raises(ViewerError, match="no such file"):
        PendingData(tmp_path / "missing")
