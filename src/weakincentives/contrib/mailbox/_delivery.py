"""How `RedisMailbox` turns a row of its receive script into a `Message`."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, TypeVar, cast

from weakincentives.contrib.mailbox._codec import MailboxCodec
from weakincentives.contrib.mailbox._scripts import parse_meta
from weakincentives.errors import MessageDecodeError
from weakincentives.runtime.mailbox import MailboxResolver, Message, ReceiptSettler

__all__ = ["build_message"]

T = TypeVar("T")
R = TypeVar("R")

_EPOCH = datetime.fromtimestamp(0, UTC)
"""The enqueue time reported when a message's metadata is unreadable."""


def build_message(
    row: list[Any],
    *,
    mailbox: str,
    codec: MailboxCodec[T],
    settler: ReceiptSettler,
    resolver: MailboxResolver[R],
) -> Message[T, R]:
    """Build one delivery from a receive row `{handle, delivery count, meta, body}`.

    A body `codec` cannot decode, or metadata that cannot be read, makes an undecodable
    message (its `body` raises `MessageDecodeError`; `raw_body` holds the payload), so
    a worker can dead-letter it instead of failing the whole receive.
    """
    raw_handle, count, raw_meta, payload = row
    handle = raw_handle.decode() if isinstance(raw_handle, bytes) else str(raw_handle)
    payload = payload if payload is not None else b""
    error: Exception | None = None
    body: T | None = None
    try:
        message_id, reply_to, enqueued_at = parse_meta(raw_meta)
    except (TypeError, ValueError, KeyError) as exc:
        message_id, reply_to, enqueued_at = handle.split(":")[0], None, _EPOCH
        error = exc
    else:
        try:
            body = codec.decode(payload)
        except Exception as exc:  # any codec failure makes a poison message, not a crash
            error = exc
    if error is None:
        return Message(
            id=message_id,
            body=cast("T", body),
            receipt_handle=handle,
            delivery_count=int(count),
            enqueued_at=enqueued_at,
            settler=settler,
            reply_to=reply_to,
            resolver=resolver,
            raw_body=payload,
        )
    decode_error = MessageDecodeError(
        f"message {message_id!r} in mailbox {mailbox!r} cannot be decoded by "
        f"{codec!r}: {error}; it is delivered with its raw payload so it can "
        "be dead-lettered",
    )
    decode_error.__cause__ = error
    return Message.undecodable(
        id=message_id,
        raw_body=payload,
        error=decode_error,
        receipt_handle=handle,
        delivery_count=int(count),
        enqueued_at=enqueued_at,
        settler=settler,
        reply_to=reply_to,
        resolver=resolver,
    )
