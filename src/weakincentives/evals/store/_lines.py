"""How a result becomes a line of `results.jsonl`: serialized once, secrets redacted.

The redaction policy (`weakincentives.redaction`) is compiled against the environment
when a run handle opens. A line is serialized once and re-serialized redacted only when
the result holds something to redact. `Redactor.finds_in` decides that from the result's
strings (a few microseconds). Where the result holds a value `finds_in` cannot vouch
for (a `datetime`, a pydantic model...), it decides from the line's JSON form parsed back
(plain data it always reads), not from the JSON text: there a newline is an escape (a
backslash and `n`), not the blank that `Bearer <token>` or `password = <value>` needs,
and the text would hide such a secret. Either way, the line written holds exactly what
`Redactor.data` leaves of the result's JSON form: the checks only decide whether `data`
has anything to do.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any

from weakincentives import serde
from weakincentives.redaction import default_redactor

from .._records import EvalResult

__all__ = ["result_dumps"]

_UNPARSED: Any = object()


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
        parsed: Any = _UNPARSED
        if found is None:
            parsed = json.loads(data)
            # None here: a secret-looking key (or a huge value), which `data` replaces.
            found = redactor.finds_in(parsed) is not False
        if not found:
            return data
        clean = redactor.data(json.loads(data) if parsed is _UNPARSED else parsed)
        return json.dumps(clean, ensure_ascii=False, separators=(",", ":")).encode()

    return redacted_dumps
