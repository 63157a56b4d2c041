"""`collector_paused`: the cyclic garbage collector paused while a report is read or computed.

A report of 100,000 results holds about 700,000 container objects, all kept and none in
a cycle. Reading them, and computing statistics over them (which makes and keeps lists
of per-result values), triggers collections of the oldest generation that walk the
whole heap again and again: a third of the reading time, and about a second of rendering
the report of 100,000 results. Reading (`read_report`), rendering (`render_report`), the
JSON export (`report_to_dict`) and comparisons (`compare_all`) run with the collector
paused, so a program calling them pays what `wink eval report` pays. The collector is
switched back on afterwards if it was on (nested pauses leave it to the outermost one);
garbage made meanwhile is collected then.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["collector_paused"]


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector inside the block (also usable as a decorator)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
