from __future__ import annotations

import contextvars
import json
import logging
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from weakincentives.clock import FakeClock
from weakincentives.runtime.bundle import DebugBundleConfig, bundle_recorder

LOG = logging.getLogger("tests.bundle.sample")


@pytest.fixture(autouse=True)
def root_at_warning() -> Iterator[None]:
    root = logging.getLogger()
    saved = root.level
    root.setLevel(logging.WARNING)
    yield
    root.setLevel(saved)


def logs_of(path: Path | None) -> list[dict[str, Any]]:
    assert path is not None
    with zipfile.ZipFile(path) as zf:
        text = zf.read("logs.jsonl").decode()
    return [json.loads(line) for line in text.splitlines()]


def messages_of(path: Path | None) -> list[str]:
    return [r["message"] for r in logs_of(path)]


def test_records_have_time_level_logger_message_and_exception(tmp_path: Path) -> None:
    config = DebugBundleConfig(directory=tmp_path)
    with bundle_recorder(config, request_id="r", clock=FakeClock()) as rec:
        LOG.debug("step %d", 1)
        try:
            raise RuntimeError("tool exploded")
        except RuntimeError:
            LOG.exception("tool failed")
    first, second = logs_of(rec.path)
    assert first["level"] == "DEBUG" and first["message"] == "step 1"
    assert first["logger"] == "tests.bundle.sample" and first["exception"] is None
    assert first["thread"] == threading.current_thread().name
    assert first["time"].endswith("+00:00")
    assert second["level"] == "ERROR" and "RuntimeError: tool exploded" in second["exception"]
    assert rec.manifest is not None and rec.manifest.log_records == 2


def test_concurrent_recorders_keep_their_logs_apart(tmp_path: Path) -> None:
    config = DebugBundleConfig(directory=tmp_path)
    barrier = threading.Barrier(2, timeout=10)
    paths: dict[str, Path | None] = {}

    def sample(name: str) -> None:
        with bundle_recorder(config, request_id=name, clock=FakeClock()) as rec:
            for i in range(30):
                LOG.info("%s %d", name, i)
                if i % 10 == 0:
                    barrier.wait()  # both samples are recording and logging at once
        paths[name] = rec.path

    threads = [threading.Thread(target=sample, args=(n,)) for n in ("alpha", "beta")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    LOG.warning("outside any sample")
    for name in ("alpha", "beta"):
        assert messages_of(paths[name]) == [f"{name} {i}" for i in range(30)]


def test_work_run_in_a_copy_of_the_context_is_captured(tmp_path: Path) -> None:
    config = DebugBundleConfig(directory=tmp_path)
    with bundle_recorder(config, request_id="r", clock=FakeClock()) as rec:
        ctx = contextvars.copy_context()
        helper = threading.Thread(target=ctx.run, args=(LOG.info, "from a helper thread"))
        bare = threading.Thread(target=LOG.info, args=("from a bare thread",))
        for t in (helper, bare):
            t.start()
            t.join(timeout=10)
    assert messages_of(rec.path) == ["from a helper thread"]


def test_nested_recorders_both_see_the_inner_logs(tmp_path: Path) -> None:
    config = DebugBundleConfig(directory=tmp_path)
    with bundle_recorder(config, request_id="outer", clock=FakeClock()) as outer:
        LOG.info("outer only")
        with bundle_recorder(config, request_id="inner", clock=FakeClock()) as inner:
            LOG.info("both")
        LOG.info("outer again")
    assert messages_of(outer.path) == ["outer only", "both", "outer again"]
    assert messages_of(inner.path) == ["both"]


def test_level_filter_and_record_limit(tmp_path: Path) -> None:
    config = DebugBundleConfig(directory=tmp_path, log_level=logging.INFO, max_log_records=2)
    with bundle_recorder(config, request_id="r", clock=FakeClock()) as rec:
        LOG.debug("too detailed")
        for i in range(5):
            LOG.info("kept or dropped %d", i)
    assert messages_of(rec.path) == ["kept or dropped 0", "kept or dropped 1"]
    assert rec.manifest is not None
    assert (rec.manifest.log_records, rec.manifest.logs_dropped) == (2, 3)


def test_the_bundle_machinery_logs_are_not_captured(tmp_path: Path) -> None:
    config = DebugBundleConfig(directory=tmp_path)
    with bundle_recorder(config, request_id="r", clock=FakeClock()) as rec:
        logging.getLogger("weakincentives.runtime.bundle").warning("internal")
        rec.set_request(object())  # logs a capture warning on the same logger
        LOG.info("user")
    assert messages_of(rec.path) == ["user"]


def test_without_logs_there_is_no_log_file_and_no_handler(tmp_path: Path) -> None:
    root = logging.getLogger()
    handlers = list(root.handlers)
    config = DebugBundleConfig(directory=tmp_path, include_logs=False)
    with bundle_recorder(config, request_id="r", clock=FakeClock()) as rec:
        assert root.handlers == handlers
        LOG.warning("not captured")
    assert rec.path is not None
    with zipfile.ZipFile(rec.path) as zf:
        assert "logs.jsonl" not in zf.namelist()


def test_root_level_and_handlers_are_restored(tmp_path: Path) -> None:
    root = logging.getLogger()
    handlers = list(root.handlers)
    config = DebugBundleConfig(directory=tmp_path)
    with bundle_recorder(config, request_id="r", clock=FakeClock()):
        assert root.level == logging.DEBUG
        assert len(root.handlers) == len(handlers) + 1
    assert root.level == logging.WARNING
    assert root.handlers == handlers
