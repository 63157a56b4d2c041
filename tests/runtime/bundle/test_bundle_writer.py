from __future__ import annotations

import hashlib
import json
import logging
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from weakincentives.adapters import PromptResponse
from weakincentives.clock import FakeClock
from weakincentives.errors import ConfigurationError
from weakincentives.runtime.bundle import (
    BundleWriter,
    DebugBundleConfig,
    bundle_recorder,
)
from weakincentives.runtime.session import (
    PromptExecuted,
    Session,
    TokenUsage,
    ToolInvoked,
    ToolResult,
)


@dataclass(frozen=True)
class Question:
    text: str


def read_zip(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as zf:
        return {name: zf.read(name) for name in zf.namelist()}


def manifest_of(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(read_zip(path)["manifest.json"])
    return data


def run_session(session: Session) -> None:
    session.dispatch(
        ToolInvoked(
            name="add",
            params={"a": 2, "b": 2},
            result=ToolResult(message="4", value=4),
            success=True,
            call_id="call-1",
            duration_ms=1.0,
        )
    )
    session.dispatch(
        PromptExecuted(
            prompt_ns="demo",
            prompt_key="calc",
            prompt_name="demo:calc",
            text="4",
            usage=TokenUsage(input_tokens=10, output_tokens=3, cached_tokens=2),
            tool_calls=1,
        )
    )


def test_bundle_has_the_guide_path_and_a_complete_manifest(tmp_path: Path) -> None:
    clock = FakeClock()
    session = Session(session_id="sess-1", clock=clock)
    config = DebugBundleConfig(directory=tmp_path)
    with bundle_recorder(
        config, request_id="req-1", kind="eval", clock=clock, run_id="run-7"
    ) as rec:
        rec.set_request(Question("2 + 2?"))
        rec.set_session_before(session)
        run_session(session)
        logging.getLogger("tests.agent").info("answered %s", "4")
        clock.advance(1.5)
        rec.set_response(PromptResponse(prompt_name="demo:calc", text="4", output=None))
        rec.set_session_after(session)
        rec.set_metrics({"latency_ms": 1500.0})
        rec.set_eval({"sample_id": "math-1", "experiment_name": "baseline", "latency_ms": 1500})

    assert rec.path == tmp_path / "req-1" / "20240101T000000.000000Z.zip"
    members = read_zip(rec.path)
    assert set(members) == {
        "manifest.json", "request.json", "response.json", "session/before.json",
        "session/after.json", "logs.jsonl", "metrics.json", "eval.json",
    }  # fmt: skip
    manifest = manifest_of(rec.path)
    assert manifest["format"] == "wink-debug-bundle"
    assert manifest["format_version"] == 1
    assert manifest["kind"] == "eval"
    assert manifest["status"] == "ok" and manifest["error"] is None
    assert manifest["ids"] == {
        "request_id": "req-1", "sample_id": "math-1", "experiment": "baseline",
        "session_id": "sess-1", "run_id": "run-7",
    }  # fmt: skip
    assert manifest["timings"]["duration_ms"] == 1500.0
    assert manifest["timings"]["started_at"] == "2024-01-01T00:00:00Z"
    assert manifest["timings"]["finished_at"] == "2024-01-01T00:00:01.500000Z"
    listed = {f["name"]: f for f in manifest["files"]}
    assert set(listed) == set(members) - {"manifest.json"}
    for name, entry in listed.items():
        assert entry["size"] == len(members[name])
        assert entry["sha256"] == hashlib.sha256(members[name]).hexdigest()
    assert rec.manifest is not None and rec.manifest.bundle_id == manifest["bundle_id"]
    metrics = json.loads(members["metrics.json"])
    assert metrics["usage"] == {
        "input_tokens": 10, "output_tokens": 3, "cached_tokens": 2, "total_tokens": 13,
    }  # fmt: skip
    assert (metrics["tool_calls"], metrics["prompt_runs"]) == (1, 1)
    assert metrics["latency_ms"] == 1500.0 and metrics["duration_ms"] == 1500.0
    assert json.loads(members["request.json"]) == {"text": "2 + 2?"}
    before = json.loads(members["session/before.json"])
    after = json.loads(members["session/after.json"])
    assert before["slices"] == {} and len(after["slices"]) == 2


@pytest.mark.parametrize(
    ("exc", "kind"),
    [(ValueError("agent broke"), "unhandled"), (KeyboardInterrupt(), "cancelled")],
)
def test_an_escaping_exception_propagates_and_is_recorded(
    tmp_path: Path, exc: BaseException, kind: str
) -> None:
    config = DebugBundleConfig(directory=tmp_path)
    rec = bundle_recorder(config, request_id="r", clock=FakeClock())
    with pytest.raises(type(exc)), rec:
        raise exc
    assert rec.path is not None
    manifest = manifest_of(rec.path)
    assert manifest["status"] == "error"
    assert manifest["error"]["kind"] == kind
    assert manifest["error"]["type"] == type(exc).__name__
    error = json.loads(read_zip(rec.path)["error.json"])
    assert type(exc).__name__ in error["traceback"]


def test_set_error_marks_the_bundle_failed_without_an_exception(tmp_path: Path) -> None:
    config = DebugBundleConfig(directory=tmp_path)
    with bundle_recorder(config, request_id="r", clock=FakeClock()) as rec:
        rec.set_error("timeout", "sample took longer than 30 s")
    assert rec.path is not None
    manifest = manifest_of(rec.path)
    assert manifest["status"] == "error"
    assert manifest["error"] == {
        "kind": "timeout", "message": "sample took longer than 30 s", "type": None,
    }  # fmt: skip


def test_an_unwritable_directory_does_not_fail_the_sample(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the bundle directory should be")
    config = DebugBundleConfig(directory=blocker / "bundles")
    finished = False
    with bundle_recorder(config, request_id="r", clock=FakeClock()) as rec:
        rec.set_request({"q": 1})
        finished = True
    assert finished
    assert rec.path is None and rec.manifest is None
    warnings = [r for r in caplog.records if r.name == "weakincentives.runtime.bundle"]
    assert warnings and "was not written" in warnings[0].getMessage()


def test_a_failure_while_zipping_leaves_no_file_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom(*args: object, **kwargs: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(zipfile.ZipFile, "writestr", boom)
    config = DebugBundleConfig(directory=tmp_path)
    with bundle_recorder(config, request_id="r", clock=FakeClock()) as rec:
        rec.set_request({"q": 1})
    assert rec.path is None
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []


def test_a_value_that_cannot_be_captured_is_named_in_the_manifest(tmp_path: Path) -> None:
    config = DebugBundleConfig(directory=tmp_path)
    with bundle_recorder(config, request_id="r", clock=FakeClock()) as rec:
        rec.set_request(object())
        rec.set_response({"answer": "4"})
    assert rec.path is not None
    members = read_zip(rec.path)
    assert "request.json" not in members and "response.json" in members
    errors = manifest_of(rec.path)["capture_errors"]
    assert len(errors) == 1 and errors[0].startswith("request.json: SerdeError")


def test_files_over_the_size_limit_are_left_out_and_reported(tmp_path: Path) -> None:
    config = DebugBundleConfig(directory=tmp_path, max_file_bytes=1000)
    with bundle_recorder(config, request_id="r", clock=FakeClock()) as rec:
        rec.set_request({"q": "x" * 2000})
        rec.set_response({"a": "small"})
    assert rec.path is not None
    members = read_zip(rec.path)
    assert "request.json" not in members and "response.json" in members
    assert "over max_file_bytes=1000" in manifest_of(rec.path)["capture_errors"][0]


def test_bundles_of_the_same_request_and_time_never_overwrite(tmp_path: Path) -> None:
    config = DebugBundleConfig(directory=tmp_path)
    clock = FakeClock()
    paths = []
    for attempt in range(3):
        with bundle_recorder(config, request_id="r", clock=clock) as rec:
            rec.set_request({"attempt": attempt})
        assert rec.path is not None
        paths.append(rec.path.name)
    assert paths == [
        "20240101T000000.000000Z.zip", "20240101T000000.000000Z-1.zip",
        "20240101T000000.000000Z-2.zip",
    ]  # fmt: skip
    assert sorted(p.name for p in (tmp_path / "r").iterdir()) == sorted(paths)


@pytest.mark.parametrize(
    ("request_id", "dirname"),
    [("../../evil", ".._.._evil"), ("..", "__"), ("a/b\\c:d", "a_b_c_d"), ("", "_")],
)
def test_request_ids_cannot_escape_the_bundle_directory(
    tmp_path: Path, request_id: str, dirname: str
) -> None:
    config = DebugBundleConfig(directory=tmp_path / "bundles")
    with bundle_recorder(config, request_id=request_id, clock=FakeClock()) as rec:
        pass
    assert rec.path is not None
    assert rec.path.parent == tmp_path / "bundles" / dirname


def test_extra_files_are_stored_under_extra(tmp_path: Path) -> None:
    config = DebugBundleConfig(directory=tmp_path)
    with bundle_recorder(config, request_id="r", clock=FakeClock()) as rec:
        rec.add_file("raw.bin", b"\x00\xff\x01")
        rec.add_file("notes/readme.txt", "hello")
        rec.add_file("config.json", {"model": "m"})
        rec.add_file("../escape.txt", "nope")
    assert rec.path is not None
    members = read_zip(rec.path)
    assert members["extra/raw.bin"] == b"\x00\xff\x01"
    assert members["extra/notes/readme.txt"] == b"hello"
    assert json.loads(members["extra/config.json"]) == {"model": "m"}
    assert not any("escape" in name for name in members)
    assert "extra/../escape.txt" in manifest_of(rec.path)["capture_errors"][0]


def test_calls_after_the_bundle_was_written_are_ignored(tmp_path: Path) -> None:
    config = DebugBundleConfig(directory=tmp_path)
    with bundle_recorder(config, request_id="r", clock=FakeClock()) as rec:
        pass
    assert rec.path is not None
    written = rec.path.read_bytes()
    rec.set_request({"late": True})
    with rec:  # a second exit must not write a second bundle
        pass
    assert rec.path.read_bytes() == written
    assert len(list((tmp_path / "r").iterdir())) == 1


def test_a_disabled_writer_does_nothing(tmp_path: Path) -> None:
    root = logging.getLogger()
    handlers = list(root.handlers)
    with bundle_recorder(None, request_id="r") as rec:
        assert root.handlers == handlers
        rec.set_request({"q": 1})
        rec.set_session_before(Session())
    assert not rec.enabled
    assert rec.path is None and rec.manifest is None


def test_ids_can_be_set_while_recording(tmp_path: Path) -> None:
    config = DebugBundleConfig(directory=tmp_path)
    writer = BundleWriter(config, request_id="r", clock=FakeClock(), bundle_id="b-1")
    with writer:
        writer.set_ids(sample_id="s-1", experiment="exp", session_id="sess", run_id=None)
    assert writer.manifest is not None
    assert writer.manifest.bundle_id == "b-1"
    assert (writer.manifest.ids.sample_id, writer.manifest.ids.experiment) == ("s-1", "exp")
    assert writer.manifest.ids.session_id == "sess" and writer.manifest.ids.run_id is None


def test_a_clock_before_1980_still_writes_a_zip(tmp_path: Path) -> None:
    clock = FakeClock(start=datetime(1970, 1, 1, tzinfo=UTC))
    config = DebugBundleConfig(directory=tmp_path)
    with bundle_recorder(config, request_id="r", clock=clock) as rec:
        pass
    assert rec.path is not None and rec.path.name == "19700101T000000.000000Z.zip"
    assert "manifest.json" in read_zip(rec.path)


@pytest.mark.parametrize(
    "build",
    [
        lambda p: DebugBundleConfig(directory=p, max_log_records=-1),
        lambda p: DebugBundleConfig(directory=p, max_file_bytes=0),
    ],
    ids=["logs", "bytes"],
)
def test_invalid_configs_are_rejected(
    tmp_path: Path, build: Callable[[Path], DebugBundleConfig]
) -> None:
    with pytest.raises(ConfigurationError):
        build(tmp_path)
