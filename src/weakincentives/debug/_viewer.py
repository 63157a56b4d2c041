"""`wink debug`: serve the viewer over runs or a bundle, on 127.0.0.1 unless told otherwise.

The web stack (starlette, uvicorn) is the `[viewer]` extra; it is imported when a viewer
is created, so `weakincentives.debug` works without it.

Examples:
    >>> with ViewerServer("runs/") as server:  # doctest: +SKIP
    ...     print(server.url)
    http://127.0.0.1:40123/
"""

from __future__ import annotations

import socket
import threading
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from weakincentives.errors import ViewerError

from ._host import DEFAULT_HOST, is_loopback
from ._viewer_data import ViewerData
from ._viewer_pending import PendingData

if TYPE_CHECKING:
    import uvicorn
    from starlette.applications import Starlette

__all__ = ["ViewerServer", "create_viewer_app"]

_INSTALL_HINT = "`wink debug` needs the viewer extra: pip install 'weakincentives[viewer]'"
_STOP_TIMEOUT = 10.0


def create_viewer_app(target: str | Path | ViewerData, *, host: str = DEFAULT_HOST) -> Starlette:
    """The viewer's ASGI app over `target` (a run, a directory of runs, or a bundle).

    Args:
        target: What to show, or a `ViewerData` already opened.
        host: The address the app is served on: when it is loopback, requests must name
            a loopback host (DNS-rebinding guard); otherwise any `Host` is accepted.

    Raises:
        ViewerError: `target` cannot be shown, or the `[viewer]` extra is missing.
    """
    data = target if isinstance(target, ViewerData) else ViewerData.open(target)
    return _app(data, host)


def _app(data: ViewerData | PendingData, host: str) -> Starlette:
    try:
        from ._viewer_app import LOOPBACK_HOSTS, create_starlette_app
    except ModuleNotFoundError as exc:  # pragma: no cover - depends on the environment
        raise ViewerError(f"{_INSTALL_HINT} ({exc})") from exc
    allowed = LOOPBACK_HOSTS if is_loopback(host) else None
    return create_starlette_app(data, allowed_hosts=allowed)


class ViewerServer:
    """The viewer served by uvicorn on `host:port` (port 0 picks a free port).

    `bind` comes first (`start` and `serve_forever` call it): once it returns, the URL is
    known and a browser's connection waits in the socket's queue until the server loop
    runs, so nobody has to poll for readiness. `start` serves from a background thread
    (tests, notebooks); `serve_forever` from the calling thread (the CLI; Ctrl-C stops it).

    Given a path, the server checks it at once and indexes it on a background thread
    (`PendingData`): the page is served meanwhile, and the API answers once the index is
    built. When the runs cannot be read, the API answers with the error and the server
    stops (`serve_forever` raises it).

    Args:
        target: What to show (see `create_viewer_app`).
        host: Address to bind; the default is loopback only.
        port: Port to bind; 0 for any free port.
        log_level: uvicorn's log level.

    Raises:
        ViewerError: `target` is not a run, a directory of runs or a bundle (binding
            errors are raised by `bind`).
    """

    def __init__(
        self,
        target: str | Path | ViewerData,
        *,
        host: str = DEFAULT_HOST,
        port: int = 0,
        log_level: str = "warning",
    ) -> None:
        self._host = host
        self._port = port
        self._log_level = log_level
        self._socket: socket.socket | None = None
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._pending: PendingData | None = None
        if isinstance(target, ViewerData):
            target.warm()  # the landing page is made while the server starts
            self._app = _app(target, host)
        else:
            # Checked now; indexed (then warmed) while the server binds and the browser
            # loads the page (`_viewer_pending.py`).
            self._pending = PendingData(target, on_error=self._index_failed)
            self._app = _app(self._pending, host)

    @property
    def address(self) -> tuple[str, int]:
        """`(host, port)` actually bound.

        Raises:
            ViewerError: the server was not started.
        """
        if self._socket is None:
            raise ViewerError("the viewer is not listening yet; call start() first")
        host, port = self._socket.getsockname()[:2]
        return host, port

    @property
    def url(self) -> str:
        """`http://host:port/` of the running viewer."""
        host, port = self.address
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{port}/"

    def bind(self) -> str:
        """Bind and listen (no serving yet); returns the URL.

        Raises:
            ViewerError: the address cannot be bound, or uvicorn is missing.
        """
        self._bound()
        return self.url

    def _bound(self) -> tuple[uvicorn.Server, socket.socket]:
        if self._server is None or self._socket is None:
            try:
                import uvicorn
            except ModuleNotFoundError as exc:  # pragma: no cover - depends on the environment
                raise ViewerError(f"{_INSTALL_HINT} ({exc})") from exc
            self._socket = _listen(self._host, self._port)
            config = uvicorn.Config(
                self._app, log_level=self._log_level, access_log=False, lifespan="off",
                ws="none", http="h11", server_header=False, log_config=None,
            )  # fmt: skip
            self._server = uvicorn.Server(config)
            if self._pending is not None and self._pending.error is not None:
                self._server.should_exit = True  # the index failed before: nothing to serve
        return self._server, self._socket

    def start(self) -> str:
        """Bind, then serve from a background thread; returns the URL."""
        server, sock = self._bound()
        if self._thread is None:
            self._thread = threading.Thread(
                target=server.run, kwargs={"sockets": [sock]},
                name="wink-debug-viewer", daemon=True,
            )  # fmt: skip
            self._thread.start()
        return self.url

    def serve_forever(self) -> None:
        """Bind if needed and serve from this thread until interrupted (Ctrl-C).

        Raises:
            ViewerError: the runs could not be indexed (the server stops then).
        """
        server, sock = self._bound()
        try:
            server.run(sockets=[sock])
        finally:
            self._close_socket()
        if self._pending is not None and self._pending.error is not None:
            raise ViewerError(str(self._pending.error)) from self._pending.error

    def _index_failed(self, error: ViewerError) -> None:
        """The background index failed: stop serving (`serve_forever` raises it)."""
        del error
        if self._server is not None:
            self._server.should_exit = True

    def stop(self) -> None:
        """Stop serving and close the socket (waits for the server thread)."""
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(_STOP_TIMEOUT)
            self._thread = None
        self._close_socket()

    def _close_socket(self) -> None:
        if self._socket is not None:
            self._socket.close()
            self._socket = None
        self._server = None  # a stopped uvicorn server is not restarted; bind makes a new one

    def __enter__(self) -> ViewerServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _listen(host: str, port: int) -> socket.socket:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise ViewerError(f"cannot resolve --host {host!r}: {exc}") from exc
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise ViewerError(
            f"cannot listen on {host}:{port}: {exc}; pick another --port (0 picks a free one)"
        ) from exc
    sock.setblocking(False)
    return sock
