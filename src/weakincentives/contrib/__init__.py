"""Integrations with outside systems, each behind an optional extra.

`weakincentives.contrib.mailbox` holds `RedisMailbox` (extra `[redis]`).
"""
