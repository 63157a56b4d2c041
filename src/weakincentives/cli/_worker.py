"""`wink worker TARGET --redis URL`: serve evaluation (and agent) requests from Redis.

TARGET (`module:factory` or `path/to/file.py:factory`) names a
`weakincentives.contrib.distributed.WorkerSpec`, or a factory returning one that takes
no argument or a `WorkerContext` (the worker's Redis client, to share a
`RedisResponseCache`). The worker runs until SIGTERM or SIGINT, then lets samples in
flight finish for `--shutdown-timeout` seconds and returns the rest to the queue. It
outlives Redis outages (it reconnects and retries with backoff). Exit status: 0 after a
clean stop, 1 when a loop failed, 2 for a bad configuration.
"""

from __future__ import annotations

import logging
from typing import Annotated

import typer

from weakincentives.cli._targets import load_object
from weakincentives.errors import WinkError
from weakincentives.redaction import redact_logs

from ._console import fail

__all__ = ["register", "worker"]


def worker(
    target: Annotated[
        str,
        typer.Argument(help="module:factory or path.py:factory returning a WorkerSpec."),
    ],
    redis_url: Annotated[
        str,
        typer.Option(
            "--redis", envvar="WINK_REDIS_URL", help="Redis URL, e.g. redis://host:6379/0."
        ),
    ],
    requests: Annotated[str, typer.Option(help="Mailbox of eval requests.")] = "eval-requests",
    namespace: Annotated[str, typer.Option(help="Key prefix (same as the clients').")] = "wink",
    concurrency: Annotated[int, typer.Option(min=1, help="Samples evaluated at once.")] = 1,
    health_port: Annotated[
        int | None,
        typer.Option(help="Serve /health/live and /health/ready on this port (0: any)."),
    ] = None,
    health_host: Annotated[str, typer.Option(help="Interface of the health server.")] = (
        "127.0.0.1"
    ),
    agent: Annotated[
        bool, typer.Option("--agent", help="Also serve the AgentLoop's production requests.")
    ] = False,
    agent_requests: Annotated[
        str, typer.Option(help="Mailbox of production requests (with --agent).")
    ] = "agent-requests",
    dlq: Annotated[
        str | None,
        typer.Option(help="Dead-letter mailbox (default: <requests>-dlq).", show_default=False),
    ] = None,
    max_deliveries: Annotated[
        int, typer.Option(min=1, help="Deliveries before a failing message is dead-lettered.")
    ] = 5,
    visibility_timeout: Annotated[
        float,
        typer.Option(help="Seconds a received message stays hidden (a dead worker's returns)."),
    ] = 300.0,
    shutdown_timeout: Annotated[
        float, typer.Option(help="Seconds in-flight samples get to finish on SIGTERM.")
    ] = 30.0,
    log_level: Annotated[str, typer.Option(help="DEBUG, INFO, WARNING or ERROR.")] = "INFO",
) -> None:
    """Evaluate samples sent to a Redis mailbox (run as many workers as you like)."""
    from weakincentives.contrib.distributed import (
        DistributedWorker,
        WorkerContext,
        WorkerOptions,
        redis_client,
        resolve_worker_spec,
    )

    level = logging.getLevelName(log_level.upper())
    if not isinstance(level, int):
        fail(f"unknown --log-level {log_level!r}; use DEBUG, INFO, WARNING or ERROR")
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    redact_logs()
    try:
        options = WorkerOptions(
            requests=requests, namespace=namespace, concurrency=concurrency, dlq=dlq,
            max_deliveries=max_deliveries, visibility_timeout=visibility_timeout,
            agent_requests=agent_requests if agent else None, health_port=health_port,
            health_host=health_host, shutdown_timeout=shutdown_timeout,
        )  # fmt: skip
        client = redis_client(redis_url)
        context = WorkerContext(client=client, namespace=namespace, redis_url=redis_url)
        spec = resolve_worker_spec(load_object(target, what="TARGET"), context)
        served = DistributedWorker(spec, client=client, options=options)
    except (WinkError, ValueError) as exc:  # a bad flag, target, factory or Redis URL
        fail(exc)
    try:
        clean = served.run()
    finally:
        client.close()
    if not clean:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add `wink worker` to `app`."""
    app.command("worker")(worker)
