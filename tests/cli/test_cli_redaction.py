"""A planted secret appears nowhere on disk or on screen (issue 14).

One run holds every planted secret of `tests/helpers/secrets.py` in its inputs, its
metadata, the agent's transcript, log records and errors; then every place that writes or
shows the run is searched for them: the run directory (results, manifest, bundles), `wink
query` in every format, `wink eval report` and its HTML report, and the viewer's API.
"""

from __future__ import annotations

import json
import logging
import zipfile
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.helpers.secrets import ENV_SECRETS, PLANTED, SECRETS, assert_no_secret
from weakincentives.cli import app
from weakincentives.debug._viewer_data import ViewerData
from weakincentives.evals import RunStore, Sample, exact_match, run_eval
from weakincentives.runtime import FunctionLoop, Session
from weakincentives.runtime.session import PromptExecuted

EXTRA = "ak-planted-123456"
ALL = [*SECRETS, EXTRA]


def leaky(text: str, session: Session) -> str:
    """Echo the input into the transcript and a log record, and fail on every other one."""
    logging.getLogger("tests.leaky").warning("handling %s", text)
    session.dispatch(
        PromptExecuted(prompt_ns="t", prompt_key="k", prompt_name="leaky", text=f"I saw {text}")
    )
    if len(text) % 2:
        raise PermissionError(f"rejected {text}")
    return f"echo: {text}"


@pytest.fixture
def run_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name, value in ENV_SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(tmp_path)
    samples = [
        Sample(
            id=f"p{i}",
            input=text,
            expected=f"expected {text}",
            metadata={"api_key": EXTRA, "note": text},
        )
        for i, (_, text, _) in enumerate(PLANTED)
    ]
    loop: FunctionLoop[str, str] = FunctionLoop(leaky, name="leaky")
    run_eval(samples, loop, exact_match, store=tmp_path / "runs", run_id="r1", bundles="all")
    return tmp_path / "runs" / "r1"


def invoke(*args: str | Path) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args])


def test_the_run_directory_holds_no_secret(run_dir: Path) -> None:
    files = [p for p in run_dir.rglob("*") if p.is_file()]
    assert any(p.suffix == ".zip" for p in files)
    for path in files:
        if path.suffix == ".zip":
            with zipfile.ZipFile(path) as zf:
                for name in zf.namelist():
                    assert_no_secret(zf.read(name), ALL, where=f"{path.name}/{name}")
        else:
            assert_no_secret(path.read_bytes(), ALL, where=path.name)
    rows = RunStore(run_dir.parent).open("r1").latest_results()
    assert len(rows) == len(PLANTED) and any(r.error for r in rows)


@pytest.mark.parametrize("fmt", ["table", "json", "csv"])
@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM results",
        "SELECT * FROM messages",
        "SELECT * FROM logs",
        "SELECT * FROM runs",
    ],
)
def test_wink_query_shows_no_secret(run_dir: Path, fmt: str, sql: str) -> None:
    result = invoke("query", run_dir, sql, "--format", fmt)
    assert result.exit_code == 0, result.output
    assert_no_secret(result.stdout, ALL, where=f"wink query {sql!r} --format {fmt}")
    assert "[REDACTED]" in result.stdout or sql.endswith("runs")


def test_the_report_its_html_and_the_viewer_show_no_secret(run_dir: Path, tmp_path: Path) -> None:
    html = tmp_path / "report.html"
    result = invoke("eval", "report", run_dir, "--html", html)
    assert result.exit_code == 0, result.output
    assert_no_secret(result.stdout, ALL, where="wink eval report")
    assert_no_secret(html.read_text(), ALL, where="the HTML report")
    data = ViewerData.open(run_dir)
    for row in data.results("r1", [("limit", "100")])["rows"]:
        shown = json.dumps(data.result("r1", int(row["id"])))
        assert_no_secret(shown, ALL, where=f"the viewer's result {row['sample_id']}")
