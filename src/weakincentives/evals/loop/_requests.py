"""What an `EvalLoop` makes of a message body, and what it answers when it gives one up.

A mailbox made without `body_type=` (as in the spec's Redis example) delivers bodies as
plain JSON dicts: `decode_request` turns one into the loop's request type
(`EvalRequest[Any, Any]` unless told), and raises `MessageDecodeError` naming that type
when it cannot. `dead_letter_result` is the error result (kind `dead_letter`) a loop
sends to the request's `reply_to` when the worker gives the message up (undecodable,
or failing on infrastructure after every delivery it was allowed), so the sender's
report counts it instead of waiting for it. It needs the sample's id: from the decoded
request, else from whatever the raw body says.
"""

from __future__ import annotations

import json
import typing
from collections.abc import Mapping
from typing import Any

from weakincentives import serde
from weakincentives.errors import MessageDecodeError
from weakincentives.runtime.answering import dead_letter_error
from weakincentives.runtime.dlq import DeadLetter
from weakincentives.runtime.mailbox import Message

from .._records import EvalRequest, EvalResult, Score

__all__ = ["DEFAULT_REQUEST_TYPE", "dead_letter_result", "decode_request", "type_name"]

DEFAULT_REQUEST_TYPE: Any = EvalRequest[Any, Any]
"""What an `EvalLoop` decodes dict bodies as, unless given `request_type=`."""


def type_name(tp: Any) -> str:
    """`EvalRequest[str, Question]`: a type as its user wrote it (no module paths)."""
    origin = typing.get_origin(tp)
    if origin is None:
        return "Any" if tp is Any else getattr(tp, "__qualname__", repr(tp))
    args = ", ".join(type_name(arg) for arg in typing.get_args(tp))
    return f"{type_name(origin)}[{args}]"


def decode_request(body: object, request_type: Any) -> EvalRequest[Any, Any]:
    """The request in `body`: an `EvalRequest` as is, a dict decoded as `request_type`.

    Raises:
        MessageDecodeError: `body` is neither, or the dict is not a `request_type`.
    """
    if isinstance(body, EvalRequest):
        return body
    expected = type_name(request_type)
    if isinstance(body, Mapping):
        try:
            request = serde.load(request_type, body)
        except Exception as exc:  # pydantic's ValidationError, or a bad type argument
            raise MessageDecodeError(
                f"expected an {expected}: {_one_line(exc)}; send EvalRequest(sample=..., "
                "experiment=...) bodies (or their serde.dump)",
            ) from exc
        return typing.cast("EvalRequest[Any, Any]", request)
    raise MessageDecodeError(
        f"expected an {expected}, got {type(body).__name__}; send "
        "EvalRequest(sample=..., experiment=...) bodies",
    )


def dead_letter_result(message: Message[Any, Any], letter: DeadLetter[Any]) -> EvalResult | None:
    """The error result that answers a request given up on; None when it names no sample."""
    fields = _request_fields(message, letter)
    if fields is None:
        return None
    error = dead_letter_error(letter)
    return EvalResult(
        sample_id=fields["sample_id"], experiment_name=fields["experiment"],
        epoch=fields["epoch"], request_id=fields["request_id"], run_id=fields["run_id"],
        metadata=fields["metadata"], latency_ms=0, error=error, error_kind="dead_letter",
        score=Score(value=0.0, passed=False, reason=error),
        delivery_count=letter.delivery_count,
    )  # fmt: skip


def _request_fields(message: Message[Any, Any], letter: DeadLetter[Any]) -> dict[str, Any] | None:
    body = letter.body
    if isinstance(body, EvalRequest):
        return {
            "sample_id": body.sample.id, "experiment": body.experiment.name,
            "epoch": body.epoch, "request_id": str(body.request_id), "run_id": body.run_id,
            "metadata": dict(body.sample.metadata),
        }  # fmt: skip
    raw = body if isinstance(body, Mapping) else _parse(letter.raw_body)
    if raw is None and message.decode_error is None:
        raw = message.body if isinstance(message.body, Mapping) else None
    return _fields_of(raw) if isinstance(raw, Mapping) else None


def _fields_of(raw: Mapping[str, Any]) -> dict[str, Any] | None:
    sample = raw.get("sample")
    sample_id = sample.get("id") if isinstance(sample, Mapping) else None
    if not isinstance(sample_id, str) or not sample_id:
        return None
    experiment = raw.get("experiment")
    name = experiment.get("name") if isinstance(experiment, Mapping) else None
    epoch = raw.get("epoch", 0)
    metadata = sample.get("metadata") if isinstance(sample, Mapping) else None
    run_id, request_id = raw.get("run_id"), raw.get("request_id")
    return {
        "sample_id": sample_id,
        "experiment": name if isinstance(name, str) else "baseline",
        "epoch": epoch if isinstance(epoch, int) and not isinstance(epoch, bool) else 0,
        "request_id": str(request_id) if request_id is not None else None,
        "run_id": run_id if isinstance(run_id, str) else None,
        "metadata": dict(metadata) if isinstance(metadata, Mapping) else {},
    }


def _parse(raw: str | None) -> Any:
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())
