"""Integrations with outside systems, each behind an optional extra.

- `weakincentives.contrib.mailbox`: `RedisMailbox`, `RedisMailboxFactory` (extra `[redis]`);
- `weakincentives.contrib.distributed`: evaluation on many worker processes over Redis
  (`DistributedWorker`, `run_distributed`; `wink worker`), extra `[redis]`;
- `weakincentives.contrib.cache`: `RedisResponseCache`, a model-response cache shared by
  every worker (extra `[redis]`).
"""
