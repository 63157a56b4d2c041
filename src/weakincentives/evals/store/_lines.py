"""How a result becomes a line of `results.jsonl`: serialized once, secrets redacted.

The redaction policy (`weakincentives.redaction`) is compiled against the environment
when a run handle opens. A line is serialized once and re-serialized redacted only when
the result holds something to redact. `Redactor.finds_in` decides that from the result's
strings (a few microseconds), and `Redactor.finds` from the line where the result holds
a value `finds_in` cannot vouch for. Either way, the line written holds exactly what
`Redactor.data` leaves of the result's JSON form: the checks only decide whether `data`
has anything to do.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable

from weakincentives import serde
from weakincentives.redaction import default_redactor

from .._records import EvalResult

__all__ = ["result_dumps"]


@functools.cache
def _plain_dumps() -> Callable[[EvalResult], bytes]:
    return serde.dumps_for(EvalResult)


def result_dumps() -> Callable[[EvalResult], bytes]:
    """`serde.dumps` for a `results.jsonl` line, secrets redacted (see the module's docs)."""
    dumps = _plain_dumps()
    redactor = default_redactor()

    def redacted_dumps(result: EvalResult) -> bytes:
        data = dumps(result)
        found = redactor.finds_in(result)
        if found is None:
            found = redactor.finds(data.decode())
        if not found:
            return data
        clean = redactor.data(json.loads(data))
        return json.dumps(clean, ensure_ascii=False, separators=(",", ":")).encode()

    return redacted_dumps
