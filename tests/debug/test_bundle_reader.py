from __future__ import annotations

import json
import logging
import re
import sqlite3
import stat
import warnings
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from weakincentives.adapters import PromptResponse
from weakincentives.clock import FakeClock
from weakincentives.debug import (
    BUNDLE_TABLE_COLUMNS,
    BundleLimits,
    DebugBundle,
    DebugBundleConfig,
    bundle_recorder,
    bundle_tables,
)
from weakincentives.errors import BundleError
from weakincentives.runtime.session import (
    ChatMessage,
    PromptExecuted,
    PromptRendered,
    Session,
    TokenUsage,
    ToolInvoked,
    ToolResult,
)

LOG = logging.getLogger("tests.debug.reader")


def run_agent(session: Session, clock: FakeClock) -> PromptResponse[None]:
    session.dispatch(
        PromptRendered(
            prompt_ns="demo",
            prompt_key="calc",
            prompt_name="demo:calc",
            messages=(ChatMessage(role="user", content="2 + 2?"),),
            tools=("add",),
            rendered_at=clock.now(),
        )
    )
    for call_id, ok in (("c1", False), ("c2", True)):
        session.dispatch(
            ToolInvoked(
                name="add",
                params={"a": 2, "b": 2},
                result=ToolResult(message="4" if ok else "bad params", value=4, success=ok),
                success=ok,
                call_id=call_id,
                duration_ms=2.5,
                error=None if ok else "ToolValidationError: b missing",
            )
        )
    session.dispatch(
        PromptExecuted(
            prompt_ns="demo",
            prompt_key="calc",
            prompt_name="demo:calc",
            text="4",
            usage=TokenUsage(input_tokens=20, output_tokens=5),
            model_requests=2,
            tool_calls=2,
        )
    )
    return PromptResponse(prompt_name="demo:calc", text="4", output=None)


def write_bundle(directory: Path) -> tuple[Path, Session]:
    clock = FakeClock()
    session = Session(session_id="sess-1", clock=clock)
    config = DebugBundleConfig(directory=directory)
    with bundle_recorder(config, request_id="req-1", kind="eval", clock=clock) as rec:
        rec.set_request({"sample": {"id": "math-1", "input": "2 + 2?"}, "epoch": 0})
        rec.set_session_before(session)
        LOG.info("running %s", "math-1")
        response = run_agent(session, clock)
        LOG.warning("tool call failed once")
        clock.advance(0.25)
        rec.set_response(response)
        rec.set_session_after(session)
        rec.add_file("notes.txt", "hello")
        rec.set_eval(
            {
                "sample_id": "math-1",
                "experiment_name": "baseline",
                "score": {"value": 1.0, "passed": True, "reason": "exact"},
                "latency_ms": 250.0,
                "error": None,
            }
        )
    assert rec.path is not None
    return rec.path, session


def rewrite(src: Path, dst: Path, members: dict[str, bytes]) -> Path:
    del src
    with zipfile.ZipFile(dst, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return dst


def members_of(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as zf:
        return {name: zf.read(name) for name in zf.namelist()}


def test_round_trip(tmp_path: Path) -> None:
    path, session = write_bundle(tmp_path)
    bundle = DebugBundle.open(path)
    bundle.verify()
    assert bundle.path == path
    assert bundle.manifest.ids.request_id == "req-1"
    assert bundle.manifest.ids.session_id == "sess-1"
    assert bundle.manifest.status == "ok" and bundle.manifest.kind == "eval"
    assert bundle.request == {"sample": {"id": "math-1", "input": "2 + 2?"}, "epoch": 0}
    assert bundle.response is not None and bundle.response["text"] == "4"
    assert bundle.eval is not None and bundle.eval["score"]["passed"] is True
    assert bundle.error is None
    assert bundle.extra_files() == {"notes.txt": b"hello"}
    assert [(r["level"], r["message"]) for r in bundle.logs] == [
        ("INFO", "running math-1"),
        ("WARNING", "tool call failed once"),
    ]
    metrics = bundle.metrics
    assert metrics is not None and metrics["usage"]["total_tokens"] == 25
    before, after = bundle.session_before, bundle.session_after
    assert before is not None and before.slices == {}
    assert after is not None
    restored = Session.restore(after)
    assert restored[ToolInvoked].all() == session[ToolInvoked].all()
    assert restored[PromptExecuted].all() == session[PromptExecuted].all()
    assert "manifest.json" in bundle.names()


def test_a_bundle_without_optional_files_reads_as_none(tmp_path: Path) -> None:
    with bundle_recorder(
        DebugBundleConfig(directory=tmp_path, include_logs=False),
        request_id="r",
        clock=FakeClock(),
    ) as rec:
        pass
    assert rec.path is not None
    bundle = DebugBundle.open(rec.path)
    bundle.verify()
    assert (bundle.request, bundle.response, bundle.eval, bundle.error) == (None,) * 4
    assert (bundle.session_before, bundle.session_after, bundle.logs) == (None, None, [])
    tables = bundle_tables(bundle)
    assert tables["request"] == [] and tables["tool_calls"] == [] and tables["eval"] == []


def test_error_bundles_expose_the_error(tmp_path: Path) -> None:
    with bundle_recorder(DebugBundleConfig(directory=tmp_path), request_id="r") as rec:
        rec.set_error("agent", RuntimeError("model unreachable"))
    assert rec.path is not None
    bundle = DebugBundle.open(rec.path)
    assert bundle.error is not None and bundle.error["type"] == "RuntimeError"
    (row,) = bundle_tables(bundle)["manifest"]
    assert (row["status"], row["error_kind"], row["error_message"]) == (
        "error",
        "agent",
        "model unreachable",
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda m: {**m, "request.json": m["request.json"] + b" "}, "request.json fails"),
        (lambda m: {k: v for k, v in m.items() if k != "eval.json"}, "eval.json is listed but"),
        (lambda m: {**m, "extra/planted.sh": b"rm -rf /"}, "extra/planted.sh is not listed"),
    ],
    ids=["altered", "missing", "unlisted"],
)
def test_verify_names_the_damaged_file(
    tmp_path: Path, change: Callable[[dict[str, bytes]], dict[str, bytes]], message: str
) -> None:
    path, _ = write_bundle(tmp_path)
    members = change(members_of(path))
    bundle = DebugBundle.open(rewrite(path, tmp_path / "tampered.zip", members))
    with pytest.raises(BundleError, match=message):
        bundle.verify()


@pytest.mark.parametrize(
    "name",
    ["../evil.txt", "/etc/passwd", "a\\..\\evil.txt", "C:/evil.txt", "a/../../b", "./x", "a//b"],
)
def test_unsafe_member_names_are_rejected(tmp_path: Path, name: str) -> None:
    path, _ = write_bundle(tmp_path)
    members = {**members_of(path), name: b"payload"}
    with pytest.raises(BundleError, match="unsafe member name"):
        DebugBundle.open(rewrite(path, tmp_path / "evil.zip", members))


def test_symlink_members_are_rejected(tmp_path: Path) -> None:
    path = tmp_path / "link.zip"
    with zipfile.ZipFile(path, "w") as zf:
        info = zipfile.ZipInfo("manifest.json")
        info.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(info, "/etc/passwd")
    with pytest.raises(BundleError, match="symlink"):
        DebugBundle.open(path)


def test_encrypted_members_are_rejected(tmp_path: Path) -> None:
    path = tmp_path / "enc.zip"
    with zipfile.ZipFile(path, "w") as zf:
        info = zipfile.ZipInfo("manifest.json")
        info.flag_bits |= 0x1
        zf.writestr(info, "{}")
    with pytest.raises(BundleError, match="encrypted"):
        DebugBundle.open(path)


def test_duplicate_members_are_rejected(tmp_path: Path) -> None:
    path = tmp_path / "dup.zip"
    with warnings.catch_warnings(), zipfile.ZipFile(path, "w") as zf:
        warnings.simplefilter("ignore")  # zipfile warns about the duplicate we want
        zf.writestr("manifest.json", "{}")
        zf.writestr("manifest.json", "{}")
    with pytest.raises(BundleError, match="appears twice"):
        DebugBundle.open(path)


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        (BundleLimits(max_members=5), "members is over the limit"),
        (BundleLimits(max_member_bytes=50_000), "possible zip bomb"),
        (BundleLimits(max_total_bytes=100_000), "possible zip bomb"),
    ],
    ids=["members", "member-bytes", "total-bytes"],
)
def test_zip_bomb_guards(tmp_path: Path, limits: BundleLimits, message: str) -> None:
    path = tmp_path / "bomb.zip"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for i in range(6):
            zf.writestr(f"zeros-{i}.bin", b"\0" * 60_000)  # ~60 kB each, compresses to ~100 B
    assert path.stat().st_size < 5_000
    with pytest.raises(BundleError, match=message):
        DebugBundle.open(path, limits=limits)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no such bundle file"),
        (b"not a zip at all", "not a readable zip"),
        ({"other.json": b"{}"}, "no manifest.json"),
        ({"manifest.json": b"{not json"}, "not valid JSON"),
        ({"manifest.json": b'{"format": "something-else"}'}, "is not a wink-debug-bundle"),
        (
            {"manifest.json": b'{"format": "wink-debug-bundle", "format_version": 99}'},
            "newer than this wink reads",
        ),
        (
            {"manifest.json": b'{"format": "wink-debug-bundle", "format_version": 1}'},
            "invalid manifest.json",
        ),
    ],
    ids=["missing", "not-zip", "no-manifest", "bad-json", "foreign", "newer", "incomplete"],
)
def test_files_that_are_not_bundles_are_rejected(
    tmp_path: Path, content: bytes | dict[str, bytes] | None, message: str
) -> None:
    path = tmp_path / "b.zip"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif isinstance(content, dict):
        rewrite(path, path, content)
    with pytest.raises(BundleError, match=message):
        DebugBundle.open(path)


def test_corrupt_member_contents_raise_bundle_errors(tmp_path: Path) -> None:
    path, _ = write_bundle(tmp_path)
    members = {
        **members_of(path),
        "logs.jsonl": b'{"message": "ok"}\nnot json\n',
        "session/after.json": b'{"slices": 3}',
        "metrics.json": b"[1, 2]",
    }
    bundle = DebugBundle.open(rewrite(path, tmp_path / "bad.zip", members))
    with pytest.raises(BundleError, match=re.escape("logs.jsonl line 2")):
        _ = bundle.logs
    with pytest.raises(BundleError, match="not a session snapshot"):
        _ = bundle.session_after
    with pytest.raises(BundleError, match="must hold a JSON object"):
        _ = bundle.metrics
    with pytest.raises(BundleError, match=re.escape("no file 'missing.txt'")):
        bundle.read_bytes("missing.txt")


def test_tables_have_their_columns_and_load_into_sqlite(tmp_path: Path) -> None:
    path, _ = write_bundle(tmp_path)
    tables = bundle_tables(DebugBundle.open(path))
    assert set(tables) == set(BUNDLE_TABLE_COLUMNS)
    db = sqlite3.connect(":memory:")
    for name, rows in tables.items():
        columns = BUNDLE_TABLE_COLUMNS[name]
        for row in rows:
            assert tuple(row) == columns
        db.execute(f"CREATE TABLE {name} ({', '.join(columns)})")
        db.executemany(
            f"INSERT INTO {name} VALUES ({', '.join('?' * len(columns))})",
            [tuple(row.values()) for row in rows],
        )
    assert db.execute("SELECT request_id, sample_id, status FROM manifest").fetchall() == [
        ("req-1", "math-1", "ok")
    ]
    assert db.execute("SELECT message FROM logs WHERE level = 'WARNING'").fetchall() == [
        ("tool call failed once",)
    ]
    assert db.execute("SELECT call_id, error FROM tool_calls WHERE NOT success").fetchall() == [
        ("c1", "ToolValidationError: b missing")
    ]
    assert db.execute(
        "SELECT json_extract(params, '$.a'), message FROM tool_calls WHERE success"
    ).fetchall() == [(2, "4")]
    assert db.execute("SELECT value FROM metrics WHERE name = 'usage.input_tokens'").fetchall() == [
        (20,)
    ]
    assert db.execute("SELECT experiment, score, passed, reason FROM eval").fetchall() == [
        ("baseline", 1.0, 1, "exact")
    ]
    assert db.execute("SELECT json_extract(json, '$.sample.id') FROM request").fetchall() == [
        ("math-1",)
    ]
    assert db.execute(
        "SELECT slice_name, count(*) FROM session_after GROUP BY slice_name ORDER BY slice_name"
    ).fetchall() == [("PromptExecuted", 1), ("PromptRendered", 1), ("ToolInvoked", 2)]
    assert db.execute("SELECT count(*) FROM session_before").fetchone() == (0,)
    files = {r[0] for r in db.execute("SELECT name FROM files")}
    assert "request.json" in files and "manifest.json" not in files


def test_table_values_are_sqlite_scalars(tmp_path: Path) -> None:
    path, _ = write_bundle(tmp_path)
    for rows in bundle_tables(DebugBundle.open(path)).values():
        for row in rows:
            for value in row.values():
                assert value is None or isinstance(value, str | int | float | bool)
    tables = bundle_tables(DebugBundle.open(path))
    assert json.loads(tables["response"][0]["json"])["text"] == "4"
