"""Checks of `RedisMailbox` and `RedisMailboxFactory` options."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from weakincentives.errors import MailboxArgumentError

__all__ = ["check_options"]


def check_options(
    name: str,
    client: Any,
    namespace: str,
    codec: object,
    body_type: Any,
    queue_ttl: timedelta,
    max_size: int | None,
) -> None:
    """Reject invalid options of a `RedisMailbox` or `RedisMailboxFactory`.

    Raises:
        MailboxArgumentError: Naming every invalid option at once.
    """
    problems: list[str] = []
    if not name:
        problems.append("a mailbox needs a non-empty name")
    if not namespace or "{" in namespace or "}" in namespace:
        problems.append(f"namespace must be non-empty and free of braces, got {namespace!r}")
    if codec is not None and body_type is not None:
        problems.append("pass codec= or body_type=, not both (body_type is for the JSON codec)")
    if queue_ttl < timedelta(seconds=1):
        problems.append(f"queue_ttl must be at least one second, got {queue_ttl}")
    if max_size is not None and max_size < 1:
        problems.append(f"max_size must be at least 1 or None, got {max_size}")
    get_encoder = getattr(client, "get_encoder", None)
    if get_encoder is not None and getattr(get_encoder(), "decode_responses", False):
        problems.append(
            "the Redis client decodes responses; create it with decode_responses=False "
            "(the default), bodies are bytes",
        )
    if problems:
        raise MailboxArgumentError("; ".join(problems))
