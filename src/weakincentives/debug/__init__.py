"""Debugging tools: read, verify and tabulate debug bundles.

A debug bundle is the zip written for one sample (see `weakincentives.runtime.bundle`,
re-exported here for convenience). `DebugBundle.open(path)` reads one safely,
`verify()` checks its checksums, and `bundle_tables` gives the rows of the SQL tables
that `wink query BUNDLE "SQL"` exposes.

Example:
    >>> from weakincentives.debug import DebugBundle, bundle_tables
    >>> bundle = DebugBundle.open("eval_bundles/<request_id>/<timestamp>.zip")  # doctest: +SKIP
    >>> bundle.verify()  # doctest: +SKIP
    >>> bundle_tables(bundle)["logs"][0]["message"]  # doctest: +SKIP
"""

from weakincentives.debug._bundle import BundleLimits, DebugBundle
from weakincentives.debug._tables import BUNDLE_TABLE_COLUMNS, bundle_tables
from weakincentives.runtime.bundle import (
    BundleManifest,
    BundleWriter,
    DebugBundleConfig,
    RedactionPolicy,
    bundle_recorder,
)

__all__ = [
    "BUNDLE_TABLE_COLUMNS",
    "BundleLimits",
    "BundleManifest",
    "BundleWriter",
    "DebugBundle",
    "DebugBundleConfig",
    "RedactionPolicy",
    "bundle_recorder",
    "bundle_tables",
]
