from __future__ import annotations

import dataclasses
import http.client
import json
import re
import sqlite3
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient
from typer.testing import CliRunner

from tests.debug.viewer_data import DemoRuns, make_result, write_runs
from weakincentives.cli import app as wink
from weakincentives.debug import (
    DEFAULT_HOST,
    ViewerData,
    ViewerServer,
    create_viewer_app,
    host_warning,
    is_loopback,
)
from weakincentives.debug._viewer_app import load_assets
from weakincentives.errors import ViewerError
from weakincentives.evals import Fingerprint, RunStore


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> DemoRuns:
    return write_runs(tmp_path_factory.mktemp("viewer-security"))


@pytest.fixture(scope="module")
def server(runs: DemoRuns) -> Iterator[ViewerServer]:
    with ViewerServer(runs.root) as running:
        yield running


def raw_get(
    server: ViewerServer, path: str, *, method: str = "GET", host: str | None = None
) -> tuple[int, dict[str, str], bytes]:
    """Send `path` byte for byte (no client-side normalization of `..` or `%2e`)."""
    address, port = server.address
    conn = http.client.HTTPConnection(address, port, timeout=10)
    try:
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        conn.putheader("Host", host or f"{address}:{port}")
        conn.endheaders()
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


# -- binding ------------------------------------------------------------------------------


def test_the_server_binds_loopback_by_default(server: ViewerServer) -> None:
    assert DEFAULT_HOST == "127.0.0.1"
    host, port = server.address
    assert host == "127.0.0.1" and port > 0
    assert server.url == f"http://127.0.0.1:{port}/"


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.0.0.2", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.5", False),
        ("example.com", False),
    ],
)
def test_only_loopback_hosts_skip_the_warning(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback
    warning = host_warning(host)
    assert (warning is None) is loopback
    if warning is not None:
        assert host in warning and "no authentication" in warning


def test_wink_debug_warns_before_serving_on_a_shared_address(
    runs: DemoRuns, monkeypatch: pytest.MonkeyPatch
) -> None:
    served: list[str] = []
    monkeypatch.setattr(ViewerServer, "serve_forever", lambda self: served.append(self.url))
    result = CliRunner().invoke(
        wink, ["debug", str(runs.root), "--host", "0.0.0.0", "--port", "0", "--no-open"]
    )
    assert result.exit_code == 0, result.output
    assert "warning: serving on 0.0.0.0" in result.output
    assert served and served[0].startswith("http://0.0.0.0:")
    quiet = CliRunner().invoke(wink, ["debug", str(runs.root), "--no-open"])
    assert quiet.exit_code == 0 and "warning" not in quiet.output
    assert "http://127.0.0.1:" in quiet.output


def test_wink_debug_refuses_a_target_it_cannot_show(tmp_path: Path) -> None:
    # A wide terminal: the message names the (long) temp path on one line.
    result = CliRunner().invoke(
        wink, ["debug", str(tmp_path / "nothing"), "--no-open"], env={"COLUMNS": "500"}
    )
    assert result.exit_code == 2
    assert "no such file or directory" in result.output


# -- file routes --------------------------------------------------------------------------

TRAVERSALS = [
    "/static/../../etc/passwd",
    "/static/..%2f..%2fetc%2fpasswd",
    "/static/..%2F..%2F..%2F..%2Fetc%2Fpasswd",
    "/static/%2e%2e/%2e%2e/etc/passwd",
    "/static/%2e%2e%2f%2e%2e%2fetc%2fpasswd",
    "/static/..%252f..%252fetc%252fpasswd",
    "/static/....//....//etc/passwd",
    "/static/..%5c..%5cetc%5cpasswd",
    "/static//etc/passwd",
    "/static/%2fetc%2fpasswd",
    "/static/../_viewer.py",
    "/static/%2e%2e/_viewer_app.py",
    "/static/./viewer.js/../../_bundle.py",
    "/static/viewer.js%00.html",
    "/../../etc/passwd",
    "/api/../../etc/passwd",
]


@pytest.mark.parametrize("path", TRAVERSALS)
def test_path_traversal_is_rejected(server: ViewerServer, path: str) -> None:
    status, _, body = raw_get(server, path)
    assert status in {400, 404}, (status, body[:200])
    assert b"root:" not in body
    assert b"import " not in body and b"def " not in body


def test_static_files_are_served_by_exact_name(server: ViewerServer) -> None:
    status, headers, body = raw_get(server, "/static/viewer.js")
    assert status == 200
    assert headers["content-type"].startswith("text/javascript")
    assert b"hashchange" in body
    status, headers, body = raw_get(server, "/")
    assert status == 200 and b'<script type="module" src="/static/viewer.js">' in body


# -- requests -----------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH"])
@pytest.mark.parametrize("path", ["/api/runs", "/api/runs/run-a/results", "/static/viewer.js", "/"])
def test_only_get_is_allowed(server: ViewerServer, method: str, path: str) -> None:
    status, headers, _ = raw_get(server, path, method=method)
    assert status == 405
    assert "GET" in headers.get("allow", "")


@pytest.mark.parametrize("host", ["evil.example", "evil.example:80", "127.0.0.1.evil.example"])
def test_foreign_host_headers_are_refused(server: ViewerServer, host: str) -> None:
    # A DNS-rebinding page reaches 127.0.0.1 under its own name: refuse that name.
    status, _, body = raw_get(server, "/api/runs", host=host)
    assert status == 400 and b"run-a" not in body


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1:1234", "[::1]:8080"])
def test_loopback_host_headers_are_served(server: ViewerServer, host: str) -> None:
    status, _, body = raw_get(server, "/api/runs", host=host)
    assert status == 200 and b"run-a" in body


def test_a_shared_server_accepts_any_host_name(runs: DemoRuns) -> None:
    app = create_viewer_app(runs.root, host="0.0.0.0")
    with TestClient(app, base_url="http://viewer.lan") as client:
        assert client.get("/api/runs").status_code == 200


@pytest.mark.parametrize("path", ["/", "/api/runs", "/api/nope", "/static/nope.js"])
def test_every_response_carries_security_headers(server: ViewerServer, path: str) -> None:
    _, headers, _ = raw_get(server, path)
    csp = headers["content-security-policy"]
    assert "default-src 'none'" in csp and "script-src 'self'" in csp
    assert "frame-ancestors 'none'" in csp
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["x-frame-options"] == "DENY"


# -- reading only -------------------------------------------------------------------------


def tree(root: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
    }


def test_no_endpoint_writes_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runs = write_runs(tmp_path / "data")
    monkeypatch.chdir(tmp_path)
    before = tree(tmp_path)
    with ViewerServer(runs.root) as server:
        for path in [
            "/", "/static/viewer.js", "/api/info", "/api/runs", "/api/runs/run-a",
            "/api/runs/run-a/results?q=answer&status=failed&sort=score&desc=1",
            "/api/runs/run-a/report.html", "/api/bundle",
            "/api/compare?base_run=run-a&base=baseline&treat=concise",
            "/api/compare?base_run=run-a&base=baseline&treat_run=run-b&treat=baseline",
        ]:  # fmt: skip
            assert raw_get(server, path)[0] in {200, 404}, path
        rows = json.loads(raw_get(server, "/api/runs/run-a/results?limit=500")[2])["rows"]
        for row in rows:
            assert raw_get(server, f"/api/runs/run-a/results/{row['id']}")[0] == 200
    assert tree(tmp_path) == before


# -- bundles ------------------------------------------------------------------------------


def evil_zip(path: Path, member: str) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("manifest.json", json.dumps({"format": "weakincentives.debug_bundle"}))
        zf.writestr(member, "pwned")
    return path


def write_run_with_bundle(root: Path, bundle: Path) -> Path:
    store = RunStore(root / "runs", sync_interval=None)
    with store.create(Fingerprint(dataset_sha256="0" * 64), run_id="evil") as run:
        run.append(dataclasses.replace(make_result("run-a", "baseline", 1), bundle_path=bundle))
    return root / "runs"


@pytest.mark.parametrize("member", ["../../evil.txt", "/tmp/evil.txt", "a/../../evil.txt"])
def test_zip_slip_bundles_are_refused_and_nothing_is_extracted(tmp_path: Path, member: str) -> None:
    work = tmp_path / "deep" / "er"
    work.mkdir(parents=True)
    bundle = evil_zip(work / "bundle.zip", member)
    with pytest.raises(ViewerError, match="unsafe member name"):
        ViewerData.open(bundle)
    data = ViewerData.open(write_run_with_bundle(work, bundle))
    (row,) = data.results("evil", [])["rows"]
    detail = data.result("evil", row["id"])
    assert detail["bundle"] is None
    assert "unsafe member name" in detail["bundle_error"]
    assert not any(p.name == "evil.txt" for p in tmp_path.rglob("*"))


@pytest.mark.parametrize("name", ["secret.txt", "secret.zip"])
def test_a_bundle_path_to_another_file_does_not_leak_it(tmp_path: Path, name: str) -> None:
    secret = tmp_path / name
    secret.write_text("TOP-SECRET-VALUE")
    data = ViewerData.open(write_run_with_bundle(tmp_path, secret))
    (row,) = data.results("evil", [])["rows"]
    detail = data.result("evil", row["id"])
    assert detail["bundle"] is None and detail["bundle_error"]
    assert "TOP-SECRET-VALUE" not in json.dumps(detail["bundle_error"])


def test_the_index_database_is_read_only(runs: DemoRuns) -> None:
    data = ViewerData.open(runs.root)
    db = data.index._db  # the connection itself: prove that writes are refused
    # OperationalError or, depending on what the connection is doing, its base class
    # DatabaseError ("attempt to write a readonly database"): refused either way.
    with pytest.raises(sqlite3.DatabaseError, match=r"readonly|read-only|query_only"):
        db.execute("DELETE FROM results")


def test_every_asset_the_page_loads_is_packaged() -> None:
    assets = load_assets()
    html = assets["index.html"][0].decode()
    wanted = set(re.findall(r'(?:src|href)="/static/([^"]+)"', html))
    for name, (body, kind) in assets.items():
        if kind.startswith("text/javascript"):
            wanted.update(re.findall(r'from "\./([^"]+)"', body.decode()))
            # Nothing is fetched from elsewhere: no CDN, no absolute URL.
            assert "http://" not in body.decode() and "https://" not in body.decode(), name
        assert name.rpartition(".")[2] in {"html", "css", "js", "svg"}
    assert {"viewer.js", "viewer.css", "dom.js", "runs.js", "sample.js", "compare.js"} <= wanted
    assert wanted <= set(assets)
