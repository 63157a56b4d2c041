"""Distributed evaluation over Redis: many worker processes, one exactly-once report.

Run workers anywhere that reaches the Redis server (`wink worker module:factory --redis
URL`, or `DistributedWorker` in your own process), then submit from anywhere with
`run_distributed(dataset, experiments, redis_url=...)` (or `wink eval run --redis URL`).
Each run gets its own results mailbox (`eval-run-<run id>`); delivery is at-least-once
and results are de-duplicated by request id, so killed workers, restarts and Redis
outages cost time, never results. Needs the `[redis]` extra.
"""

from weakincentives.contrib.distributed._client import (
    ProgressSink,
    reply_mailbox_name,
    run_distributed,
)
from weakincentives.contrib.distributed._connection import Backoff, redis_client
from weakincentives.contrib.distributed._tracking import DEFAULT_REQUEST_DEADLINE
from weakincentives.contrib.distributed._worker import (
    DistributedWorker,
    WorkerContext,
    WorkerOptions,
    WorkerSpec,
    resolve_worker_spec,
)

__all__ = [
    "DEFAULT_REQUEST_DEADLINE",
    "Backoff",
    "DistributedWorker",
    "ProgressSink",
    "WorkerContext",
    "WorkerOptions",
    "WorkerSpec",
    "redis_client",
    "reply_mailbox_name",
    "resolve_worker_spec",
    "run_distributed",
]
