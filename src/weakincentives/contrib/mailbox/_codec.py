"""How `RedisMailbox` turns bodies into bytes and back."""

from __future__ import annotations

from typing import Any, Generic, Protocol, TypeVar

from weakincentives import serde

__all__ = ["JsonCodec", "MailboxCodec"]

T = TypeVar("T")


class MailboxCodec(Protocol[T]):
    """Encodes message bodies for the wire and decodes them on receipt.

    `decode` may raise any exception for a payload it cannot read: the mailbox then
    delivers the message as undecodable (its `body` raises `MessageDecodeError`, its
    `raw_body` holds the payload) instead of failing the whole `receive`.
    """

    def encode(self, body: T) -> bytes:
        """Return the wire form of `body`."""
        ...

    def decode(self, payload: bytes) -> T:
        """Return the body encoded in `payload`."""
        ...


class JsonCodec(Generic[T]):
    """JSON through `weakincentives.serde` (pydantic): dataclasses, datetimes, generics.

    Args:
        body_type: The type bodies are decoded into, for example
            `EvalRequest[str, str]`. None decodes plain JSON values (dicts, lists,
            strings, numbers), which is what you get back for any body then.

    Examples:
        >>> codec = JsonCodec(int)
        >>> codec.decode(codec.encode(41))
        41
    """

    def __init__(self, body_type: Any = None) -> None:
        self._body_type: Any = Any if body_type is None else body_type

    def __repr__(self) -> str:
        return f"JsonCodec({self._body_type!r})"

    def encode(self, body: T) -> bytes:
        """Serialize `body` to compact JSON.

        Raises:
            SerdeError: The body cannot be serialized.
        """
        return serde.dumps(body)

    def decode(self, payload: bytes) -> T:
        """Parse and validate `payload` into the body type.

        Raises:
            SerdeError: The payload is not JSON or does not validate.
        """
        value: T = serde.loads(self._body_type, payload)
        return value
