"""Debugging tools: read, verify and tabulate debug bundles; view runs in a browser.

A debug bundle is the zip written for one sample (see `weakincentives.runtime.bundle`,
re-exported here for convenience). `DebugBundle.open(path)` reads one safely,
`verify()` checks its checksums, and `bundle_tables` gives the rows of the SQL tables
that `wink query BUNDLE "SQL"` exposes.

`QueryDatabase.open(target)` runs read-only SQL over a run directory, a directory of
runs or a bundle (`wink query TARGET "SQL"`); `query(target, sql)` does it in one call.

`ViewerServer(target)` serves the `wink debug` web viewer over runs or a bundle (needs
the `[viewer]` extra); `write_html_report(report, path)` writes a self-contained HTML
report of an `EvalReport`.

Names are loaded on first use (module `__getattr__`): `from weakincentives.debug import
DebugBundle` reads bundles without importing the viewer, numpy or the HTML report, and
`wink` starts without them.

Examples:
    >>> from weakincentives.debug import DebugBundle, bundle_tables
    >>> bundle = DebugBundle.open("eval_bundles/<request_id>/<timestamp>.zip")  # doctest: +SKIP
    >>> bundle.verify()  # doctest: +SKIP
    >>> bundle_tables(bundle)["logs"][0]["message"]  # doctest: +SKIP
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from weakincentives.runtime.bundle import (
    BundleManifest,
    BundleWriter,
    DebugBundleConfig,
    RedactionPolicy,
    bundle_recorder,
)

if TYPE_CHECKING:
    from weakincentives.debug._bundle import BundleLimits, DebugBundle
    from weakincentives.debug._host import DEFAULT_HOST, host_warning, is_loopback
    from weakincentives.debug._html_report import render_html_report, write_html_report
    from weakincentives.debug._query import (
        BUNDLE_EXAMPLES,
        RUN_EXAMPLES,
        ColumnInfo,
        QueryDatabase,
        TableInfo,
        TargetKind,
        query,
    )
    from weakincentives.debug._readonly import QueryResult, QueryStream
    from weakincentives.debug._tables import BUNDLE_TABLE_COLUMNS, bundle_tables
    from weakincentives.debug._viewer import ViewerServer, create_viewer_app
    from weakincentives.debug._viewer_data import ViewerData
    from weakincentives.debug._viewer_index import ResultIndex
    from weakincentives.debug._viewer_types import ResultFilter

_LAZY: dict[str, str] = {
    "BundleLimits": "_bundle",
    "DebugBundle": "_bundle",
    "render_html_report": "_html_report",
    "write_html_report": "_html_report",
    "BUNDLE_EXAMPLES": "_query",
    "RUN_EXAMPLES": "_query",
    "ColumnInfo": "_query",
    "QueryDatabase": "_query",
    "TableInfo": "_query",
    "TargetKind": "_query",
    "query": "_query",
    "QueryResult": "_readonly",
    "QueryStream": "_readonly",
    "BUNDLE_TABLE_COLUMNS": "_tables",
    "bundle_tables": "_tables",
    "DEFAULT_HOST": "_host",
    "host_warning": "_host",
    "is_loopback": "_host",
    "ViewerServer": "_viewer",
    "create_viewer_app": "_viewer",
    "ViewerData": "_viewer_data",
    "ResultIndex": "_viewer_index",
    "ResultFilter": "_viewer_types",
}
"""Public name -> the private module (of this package) that defines it."""

__all__ = [
    "BUNDLE_EXAMPLES",
    "BUNDLE_TABLE_COLUMNS",
    "DEFAULT_HOST",
    "RUN_EXAMPLES",
    "BundleLimits",
    "BundleManifest",
    "BundleWriter",
    "ColumnInfo",
    "DebugBundle",
    "DebugBundleConfig",
    "QueryDatabase",
    "QueryResult",
    "QueryStream",
    "RedactionPolicy",
    "ResultFilter",
    "ResultIndex",
    "TableInfo",
    "TargetKind",
    "ViewerData",
    "ViewerServer",
    "bundle_recorder",
    "bundle_tables",
    "create_viewer_app",
    "host_warning",
    "is_loopback",
    "query",
    "render_html_report",
    "write_html_report",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
