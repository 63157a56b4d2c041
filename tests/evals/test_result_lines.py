"""What the local runner writes to a run store, byte for byte, is stable.

Each scenario runs a small dataset through `run_eval` (one sample at a time, so lines come
in order) and compares `results.jsonl`, with request, session and run ids and latencies masked,
to `golden/result_lines.txt`. A deliberate change of the result format regenerates it:
`.venv/bin/python -m tests.evals.test_result_lines`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from weakincentives.evals import Sample, Score, exact_match, run_eval
from weakincentives.experiment import BASELINE, Experiment
from weakincentives.runtime.session import Session

GOLDEN = Path(__file__).parent / "golden" / "result_lines.txt"
MASKS = (
    (re.compile(rb'"request_id":"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"'),
     b'"request_id":"<uuid4>"'),
    (re.compile(rb'"session_id":"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"'),
     b'"session_id":"<uuid4>"'),
    (re.compile(rb'"run_id":"[^"]+"'), b'"run_id":"<run>"'),
    (re.compile(rb'"latency_ms":[0-9.e+-]+'), b'"latency_ms":<ms>'),
    (re.compile(rb'"duration_ms":[0-9.e+-]+'), b'"duration_ms":<ms>'),
)  # fmt: skip

SAMPLES: list[Sample[Any, Any]] = [
    Sample(id="s1", input="q1", expected="a1", metadata={"topic": "math", "level": 2}),
    Sample(id="s2", input="q2", expected="wrong"),
    Sample(id="s3", input="boom", expected="a3"),
    Sample(id="s4", input="none", expected="a4", metadata={"nested": {"b": [1, 2.5]}}),
    Sample(id="s5", input="dict", expected={"answer": "a5"}),
]


def answer(question: str) -> Any:
    if question == "boom":
        raise ValueError("agent exploded")
    if question == "none":
        return None
    if question == "dict":
        return {"answer": "a5"}
    return "a" + question[1:]


async def answer_async(question: str) -> Any:
    return answer(question)


async def answer_with_session(question: str, session: Session) -> Any:
    return answer(question)


def picky(output: Any, expected: Any) -> Score:
    if output == "a2":
        raise RuntimeError("evaluator exploded")
    return exact_match(output, expected)


SCENARIOS: dict[str, dict[str, Any]] = {
    "sync": {"target": answer, "evaluator": exact_match},
    "async": {"target": answer_async, "evaluator": exact_match},
    "async-session": {"target": answer_with_session, "evaluator": exact_match},
    "evaluator-error": {"target": answer, "evaluator": picky},
    "epochs": {
        "target": answer_async, "evaluator": exact_match, "epochs": 2,
        "experiments": [BASELINE, Experiment(name="b", flags={"x": 1})],
    },
    "no-transcript": {"target": answer, "evaluator": exact_match, "record_transcript": False},
}  # fmt: skip


def stored_lines(
    root: Path, name: str, masks: Iterable[tuple[re.Pattern[bytes], bytes]] = MASKS
) -> list[bytes]:
    """The result lines of the one run under `root`, masked, each prefixed `name<TAB>`."""
    (run_dir,) = [p for p in root.iterdir() if p.is_dir()]
    lines = (run_dir / "results.jsonl").read_bytes().splitlines()
    for pattern, mask in masks:
        lines = [pattern.sub(mask, line) for line in lines]
    return [name.encode() + b"\t" + line for line in lines]


def golden_lines(path: Path, name: str) -> list[bytes]:
    """The lines of scenario `name` in the golden file at `path`."""
    prefix = name.encode() + b"\t"
    return [line for line in path.read_bytes().splitlines() if line.startswith(prefix)]


def masked_lines(name: str, root: Path) -> list[bytes]:
    run_eval(SAMPLES, max_concurrent=1, store=root, **SCENARIOS[name])
    return stored_lines(root, name)


def golden(name: str) -> list[bytes]:
    return golden_lines(GOLDEN, name)


@pytest.mark.parametrize("name", SCENARIOS)
def test_result_lines_are_what_they_were(tmp_path: Path, name: str) -> None:
    lines = masked_lines(name, tmp_path)
    assert all(b'"request_id":"<uuid4>"' in line for line in lines)
    assert lines == golden(name)


def regenerate(root: Path) -> None:
    """Rewrite the golden file from the current code (after a deliberate format change)."""
    lines = [line for name in SCENARIOS for line in masked_lines(name, root / name)]
    GOLDEN.write_bytes(b"\n".join(lines) + b"\n")


if __name__ == "__main__":  # pragma: no cover - `python -m tests.evals.test_result_lines`
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        regenerate(Path(tmp))
