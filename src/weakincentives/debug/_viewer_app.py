"""The viewer's web app (Starlette): a read-only JSON API and the static single-page UI.

Routes (all `GET`; any other method is answered 405):

| route | returns |
| --- | --- |
| `/` | the page (`static/index.html`); the UI routes with `#/...` fragments |
| `/static/<name>` | a packaged asset, looked up by exact name (no filesystem path is built) |
| `/api/info` | what the viewer shows |
| `/api/runs` | every run with counts |
| `/api/runs/<run>` | one run: statistics per experiment, filter values |
| `/api/runs/<run>/results?...` | one page of results (filters: `parse_results_query`) |
| `/api/runs/<run>/results/<id>` | one result in full, with its bundle |
| `/api/runs/<run>/report.html` | the run's self-contained HTML report |
| `/api/runs/<run>/charts?slice=` | the run's charts and failure groups |
| `/api/compare?base_run=&base=&treat_run=&treat=&slice=` | paired A/B statistics, charts, flips |
| `/api/pair?base_run=&base=&treat_run=&treat=` | two results (ids) side by side, with diffs |
| `/api/bundle` | the bundle, when the viewer was started on one |

Security: the server only reads; assets come from a dict built at startup; every
response carries a strict Content-Security-Policy and `nosniff`; and unless the server
was bound to a non-loopback address on purpose, requests must name a loopback host in
`Host` (which defeats DNS-rebinding pages reading the API from a browser).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from importlib import resources
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from weakincentives.errors import ConfigurationError, ViewerError

from ._viewer_data import NotFoundError, SideSpec, ViewerData
from ._viewer_pending import PendingData

__all__ = ["LOOPBACK_HOSTS", "create_starlette_app", "load_assets"]

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})
"""Host names a loopback-bound viewer accepts in the `Host` header."""

_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
_REPORT_CSP = "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'"
_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".svg": "image/svg+xml",
}


def load_assets() -> dict[str, tuple[bytes, str]]:
    """The packaged static files: name -> (bytes, content type)."""
    root = resources.files("weakincentives.debug").joinpath("static")
    assets = {}
    for entry in root.iterdir():
        suffix = "." + entry.name.rpartition(".")[2]
        if entry.is_file() and suffix in _TYPES:
            assets[entry.name] = (entry.read_bytes(), _TYPES[suffix])
    return assets


def create_starlette_app(
    data: ViewerData | PendingData, *, allowed_hosts: Collection[str] | None = LOOPBACK_HOSTS
) -> Starlette:
    """The viewer app over `data`.

    Args:
        data: What to show; while it is pending, the page and its assets are served and
            the API waits for it (`/api/info` excepted).
        allowed_hosts: Host names accepted in the `Host` header (port ignored); None
            accepts any (for a server bound to a non-loopback address on purpose).
    """
    assets = load_assets()
    api = _Api(data)

    def index(request: Request) -> Response:
        del request
        body, kind = assets["index.html"]
        return Response(body, media_type=kind, headers={"Cache-Control": "no-store"})

    def static(request: Request) -> Response:
        found = assets.get(request.path_params["name"])
        if found is None:
            return PlainTextResponse("not found", status_code=404)
        return Response(found[0], media_type=found[1], headers={"Cache-Control": "no-cache"})

    routes = [
        Route("/", index),
        Route("/static/{name:path}", static),
        Route("/api/info", api.info),
        Route("/api/runs", api.runs),
        Route("/api/runs/{run_id}", api.run),
        Route("/api/runs/{run_id}/results", api.results),
        Route("/api/runs/{run_id}/results/{result_id:int}", api.result),
        Route("/api/runs/{run_id}/report.html", api.report),
        Route("/api/runs/{run_id}/charts", api.charts),
        Route("/api/compare", api.compare),
        Route("/api/pair", api.pair),
        Route("/api/bundle", api.bundle),
    ]
    app = Starlette(
        routes=routes,
        exception_handlers={
            NotFoundError: _error_handler(404),
            ViewerError: _error_handler(400),
            ConfigurationError: _error_handler(400),
            HTTPException: _http_error,
        },
    )
    app.add_middleware(_Guard, allowed_hosts=allowed_hosts)
    return app


class _Api:
    """The JSON endpoints, each a thin layer over `ViewerData` (run in a worker thread).

    With `PendingData`, each waits until the data is built (a worker thread each).
    """

    def __init__(self, data: ViewerData | PendingData) -> None:
        self._source = data

    @property
    def _data(self) -> ViewerData:
        source = self._source
        return source.get() if isinstance(source, PendingData) else source

    def info(self, request: Request) -> Response:
        del request
        source = self._source
        return _json(source.info if isinstance(source, PendingData) else source.info())

    def runs(self, request: Request) -> Response:
        del request
        return _json({"runs": self._data.runs()})

    def run(self, request: Request) -> Response:
        return _json(self._data.run(request.path_params["run_id"]))

    def results(self, request: Request) -> Response:
        items = request.query_params.multi_items()
        return _json(self._data.results(request.path_params["run_id"], items))

    def result(self, request: Request) -> Response:
        params = request.path_params
        return _json(self._data.result(params["run_id"], params["result_id"]))

    def report(self, request: Request) -> Response:
        query = request.query_params
        text = self._data.html_report(
            request.path_params["run_id"],
            baseline=query.get("baseline"),
            slice_key=query.get("slice"),
        )
        return HTMLResponse(text, headers={"Content-Security-Policy": _REPORT_CSP})

    def compare(self, request: Request) -> Response:
        query = request.query_params
        missing = [k for k in ("base_run", "base", "treat") if not query.get(k)]
        if missing:
            raise ViewerError(
                f"compare needs {', '.join(missing)} (treat_run defaults to base_run)"
            )
        base_run = query["base_run"]
        baseline = SideSpec(base_run, query["base"])
        treatment = SideSpec(query.get("treat_run") or base_run, query["treat"])
        found = self._data.compare(baseline, treatment)
        charts = self._data.compare_charts(baseline, treatment, slice_key=query.get("slice"))
        return _json({**found, **charts})

    def charts(self, request: Request) -> Response:
        slice_key = request.query_params.get("slice")
        return _json(self._data.charts(request.path_params["run_id"], slice_key))

    def pair(self, request: Request) -> Response:
        query = request.query_params
        missing = [k for k in ("base_run", "base", "treat") if not query.get(k)]
        if missing:
            raise ViewerError(f"pair needs {', '.join(missing)} (treat_run defaults to base_run)")
        ids = []
        for name in ("base", "treat"):
            try:
                ids.append(int(query[name]))
            except ValueError:
                raise ViewerError(f"{name} must be a result id, not {query[name]!r}") from None
        base_run = query["base_run"]
        treat_run = query.get("treat_run") or base_run
        return _json(self._data.pair((base_run, ids[0]), (treat_run, ids[1])))

    def bundle(self, request: Request) -> Response:
        del request
        return _json(self._data.bundle())


def _json(data: Mapping[str, Any]) -> Response:
    return JSONResponse(dict(data), headers={"Cache-Control": "no-store"})


def _error_handler(status: int) -> Any:
    async def handle(request: Request, exc: Exception) -> Response:
        del request
        return JSONResponse({"error": str(exc)}, status_code=status)

    return handle


async def _http_error(request: Request, exc: Exception) -> Response:
    del request
    assert isinstance(exc, HTTPException)
    return JSONResponse({"error": exc.detail}, status_code=exc.status_code, headers=exc.headers)


class _Guard:
    """ASGI middleware: check the `Host` header, add security headers to every response."""

    def __init__(self, app: ASGIApp, *, allowed_hosts: Collection[str] | None) -> None:
        self._app = app
        self._allowed = None if allowed_hosts is None else frozenset(allowed_hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        if self._allowed is not None and _host(scope) not in self._allowed:
            response = PlainTextResponse("invalid Host header", status_code=400)
            await response(scope, receive, self._send_with_headers(send))
            return
        await self._app(scope, receive, self._send_with_headers(send))

    @staticmethod
    def _send_with_headers(send: Send) -> Send:
        async def wrapped(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {name.lower() for name, _ in headers}
                for name, value in (
                    (b"content-security-policy", _CSP.encode()),
                    (b"x-content-type-options", b"nosniff"),
                    (b"x-frame-options", b"DENY"),
                    (b"referrer-policy", b"no-referrer"),
                    (b"cross-origin-resource-policy", b"same-origin"),
                ):
                    if name not in present:
                        headers.append((name, value))
                message = {**message, "headers": headers}
            await send(message)

        return wrapped


def _host(scope: Scope) -> str:
    for name, value in scope.get("headers", []):
        if name == b"host":
            host: str = value.decode("latin-1").lower()
            if host.startswith("["):  # [::1]:8080
                return host.partition("]")[0] + "]"
            return host.rpartition(":")[0] if ":" in host else host
    return ""
