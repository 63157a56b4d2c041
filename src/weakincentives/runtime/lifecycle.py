"""`LoopGroup`: run several loops in one process, with health checks and a watchdog.

Typical deployment: an `AgentLoop` serving traffic and an `EvalLoop` evaluating the
same agent, side by side. `LoopGroup.run()` starts each loop in a thread, stops them
gracefully on SIGTERM or SIGINT, serves `/health/live` and `/health/ready` for the
orchestrator, and a watchdog flags loops whose heartbeat went stale.
"""

from __future__ import annotations

import json
import logging
import signal
import threading
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType
from typing import Any, Protocol

from weakincentives.clock import SYSTEM_CLOCK, Clock
from weakincentives.errors import ConfigurationError

__all__ = ["Loop", "LoopGroup"]

_log = logging.getLogger(__name__)

_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Loop(Protocol):
    """What a `LoopGroup` runs; `MailboxWorker` (so `AgentLoop`, `EvalLoop`) is one."""

    @property
    def name(self) -> str:
        """The loop's name in logs and health reports."""
        ...

    @property
    def running(self) -> bool:
        """True while `run()` is executing."""
        ...

    @property
    def last_heartbeat(self) -> float | None:
        """Monotonic time of the loop's latest sign of progress (None: none yet)."""
        ...

    def run(self) -> None:
        """Block, doing the loop's work, until it is shut down."""
        ...

    def shutdown(self, timeout: float = 30.0) -> bool:
        """Stop within `timeout` seconds; True if it stopped cleanly."""
        ...


class LoopGroup:
    """Runs loops in threads; shuts them down together; reports their health.

    Args:
        loops: The loops to run (names must be unique).
        health_port: Port of the health server (0: any free port; None: no server).
        health_host: Interface of the health server.
        watchdog_timeout: A running loop whose heartbeat is older than this is stalled:
            not ready, and reported to `on_stall`. Keep it above the loops' long poll.
        watchdog_interval: Seconds between watchdog checks (default: a quarter of
            `watchdog_timeout`).
        shutdown_timeout: How long `run()` gives the loops to stop after a signal.
        clock: Source of monotonic time (the loops' heartbeats must use the same clock).
        on_stall: Called with the names of loops that just stalled (default: log them).

    Examples:
        ```python
        group = LoopGroup([agent_loop, eval_loop], health_port=8080)
        group.run()  # until SIGTERM
        ```
    """

    def __init__(
        self,
        loops: Sequence[Loop],
        *,
        health_port: int | None = None,
        health_host: str = "127.0.0.1",
        watchdog_timeout: float = 60.0,
        watchdog_interval: float | None = None,
        shutdown_timeout: float = 30.0,
        clock: Clock = SYSTEM_CLOCK,
        on_stall: Callable[[list[str]], None] | None = None,
    ) -> None:
        names = [loop.name for loop in loops]
        if not loops or len(set(names)) != len(names):
            raise ConfigurationError(f"a LoopGroup needs loops with unique names, got {names}")
        if watchdog_timeout <= 0:
            raise ConfigurationError(f"watchdog_timeout must be > 0, got {watchdog_timeout}")
        self._loops = list(loops)
        self._health_port = health_port
        self._health_host = health_host
        self._watchdog_timeout = watchdog_timeout
        self._watchdog_interval = watchdog_interval or watchdog_timeout / 4
        self._shutdown_timeout = shutdown_timeout
        self._clock = clock
        self._on_stall = on_stall or _log_stall
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._errors: dict[str, BaseException] = {}
        self._stalled: set[str] = set()
        self._server: ThreadingHTTPServer | None = None
        self._watchdog: threading.Thread | None = None

    @property
    def loops(self) -> list[Loop]:
        """The loops in this group."""
        return list(self._loops)

    @property
    def errors(self) -> dict[str, BaseException]:
        """Exceptions that ended a loop's `run()`, by loop name."""
        return dict(self._errors)

    @property
    def health_address(self) -> tuple[str, int] | None:
        """(host, port) the health server listens on, once started (None: no server)."""
        if self._server is None:
            return None
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    # -- health ------------------------------------------------------------------------

    def stalled(self) -> list[str]:
        """Names of running loops whose heartbeat is older than `watchdog_timeout`."""
        now = self._clock.monotonic()
        return [
            loop.name
            for loop in self._loops
            if loop.running
            and loop.last_heartbeat is not None
            and now - loop.last_heartbeat > self._watchdog_timeout
        ]

    def ready(self) -> bool:
        """True when every loop is running, has beaten at least once, and is not stalled."""
        stalled = set(self.stalled())
        return all(
            loop.running and loop.last_heartbeat is not None and loop.name not in stalled
            for loop in self._loops
        )

    def status(self) -> dict[str, Any]:
        """The readiness report served by `/health/ready`."""
        now = self._clock.monotonic()
        stalled = set(self.stalled())
        return {
            "ready": self.ready(),
            "loops": [
                {
                    "name": loop.name,
                    "running": loop.running,
                    "heartbeat_age": (
                        None if loop.last_heartbeat is None else now - loop.last_heartbeat
                    ),
                    "stalled": loop.name in stalled,
                    "error": repr(self._errors[loop.name]) if loop.name in self._errors else None,
                }
                for loop in self._loops
            ],
        }

    def check_watchdog(self) -> list[str]:
        """Check heartbeats once; report loops that just stalled. Return all stalled."""
        stalled = self.stalled()
        fresh = [name for name in stalled if name not in self._stalled]
        self._stalled = set(stalled)
        if fresh:
            self._on_stall(fresh)
        return stalled

    # -- running -----------------------------------------------------------------------

    def start(self) -> None:
        """Start every loop in its own thread, the health server, and the watchdog."""
        if self._threads:
            raise ConfigurationError("this LoopGroup was already started")
        for loop in self._loops:
            thread = threading.Thread(target=self._run_loop, args=(loop,), name=loop.name)
            self._threads.append(thread)
            thread.start()
        if self._health_port is not None:
            self._server = _health_server(self, self._health_host, self._health_port)
            threading.Thread(
                target=self._server.serve_forever,
                kwargs={"poll_interval": 0.05},
                name="health",
                daemon=True,
            ).start()
        self._watchdog = threading.Thread(target=self._watch, name="watchdog", daemon=True)
        self._watchdog.start()

    def run(self) -> None:
        """Start, block until a signal or `request_shutdown()` (or every loop ended), stop.

        On the main thread, SIGTERM and SIGINT request a graceful shutdown; the previous
        handlers are restored afterwards.
        """
        previous = self._install_signal_handlers()
        try:
            self.start()
            while not self._stop.wait(0.05):
                if not any(thread.is_alive() for thread in self._threads):
                    break
            self.shutdown(self._shutdown_timeout)
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, signal.SIG_DFL if handler is None else handler)

    def request_shutdown(self) -> None:
        """Ask `run()` to shut down (safe to call from a signal handler)."""
        self._stop.set()

    def shutdown(self, timeout: float | None = None) -> bool:
        """Stop every loop, the health server and the watchdog.

        Args:
            timeout: Seconds each loop gets to stop (default: `shutdown_timeout`).

        Returns:
            True if every loop stopped cleanly.
        """
        self._stop.set()
        budget = self._shutdown_timeout if timeout is None else timeout
        results = [loop.shutdown(budget) for loop in self._loops]
        for thread in self._threads:
            thread.join(budget)
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        return all(results) and not any(thread.is_alive() for thread in self._threads)

    def _run_loop(self, loop: Loop) -> None:
        try:
            loop.run()
        except Exception as error:
            self._errors[loop.name] = error
            _log.exception("loop %s stopped with an error", loop.name)

    def _watch(self) -> None:
        while not self._stop.wait(self._watchdog_interval):
            self.check_watchdog()

    def _install_signal_handlers(self) -> dict[int, Any]:
        if threading.current_thread() is not threading.main_thread():
            return {}

        def handler(signum: int, frame: FrameType | None) -> None:
            del frame
            _log.info("received signal %d; shutting down", signum)
            self.request_shutdown()

        return {signum: signal.signal(signum, handler) for signum in _SIGNALS}


def _log_stall(names: list[str]) -> None:
    _log.error("watchdog: no heartbeat from %s; they may be stuck", ", ".join(names))


def _health_server(group: LoopGroup, host: str, port: int) -> ThreadingHTTPServer:
    class HealthHandler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/health/live":
                self._reply(200, {"live": True})
            elif self.path == "/health/ready":
                report = group.status()
                self._reply(200 if report["ready"] else 503, report)
            else:
                self._reply(404, {"error": f"no such endpoint: {self.path}"})

        def _reply(self, status: int, payload: dict[str, Any]) -> None:
            body = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            del format, args  # health probes every few seconds would flood the logs

    server = ThreadingHTTPServer((host, port), HealthHandler)
    server.daemon_threads = True
    return server
