"""`fan_out`: the local runner's worker tasks, started as plain asyncio tasks on asyncio.

Task-group semantics are kept: every worker runs at once, the first to raise cancels the
others, a cancel of the caller cancels them all, and nothing is left running when
`fan_out` returns or raises. On trio the workers are the task group's own tasks.
"""

from __future__ import annotations

import anyio
import pytest

from weakincentives.evals.runner._fanout import fan_out

BACKENDS = ["asyncio", "trio"]


class Crew:
    """Workers that each wait until all of them are running, and say how they ended."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.started = 0
        self.all_in = anyio.Event()
        self.ended: list[str] = []

    async def work(self) -> None:
        self.started += 1
        if self.started == self.count:
            self.all_in.set()
        try:
            await self.all_in.wait()  # returns only if every worker runs at once
            self.ended.append("returned")
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):  # a clean-up that takes a few turns
                for _ in range(5):
                    await anyio.sleep(0)
            self.ended.append("cancelled")
            raise


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_worker_runs_at_once_and_all_have_ended_on_return(backend: str) -> None:
    crew = Crew(50)

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            await fan_out(crew.work, 50, tg)

    anyio.run(main, backend=backend)

    assert crew.ended == ["returned"] * 50


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_first_worker_to_raise_cancels_the_others(backend: str) -> None:
    crew = Crew(10)
    calls = {"n": 0}

    async def work() -> None:
        calls["n"] += 1
        if calls["n"] == 5:
            await anyio.sleep(0)
            raise ValueError("worker 5 broke")
        await crew.work()  # never all in: one worker is missing

    errors: list[str] = []
    ended: list[str] = []

    async def main() -> None:
        try:
            async with anyio.create_task_group() as tg:
                await fan_out(work, 10, tg)
        except BaseExceptionGroup as group:
            errors.extend(str(e) for e in group.exceptions)
        ended.extend(crew.ended)  # each ended before the error went on

    anyio.run(main, backend=backend)

    assert errors == ["worker 5 broke"]
    assert ended == ["cancelled"] * 9


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_cancel_of_the_caller_cancels_every_worker(backend: str) -> None:
    crew = Crew(11)  # one more than run: they wait until cancelled

    async def main() -> None:
        with anyio.move_on_after(0.05) as scope:
            async with anyio.create_task_group() as tg:
                await fan_out(crew.work, 10, tg)
        assert scope.cancelled_caught
        assert crew.ended == ["cancelled"] * 10  # all ended before the caller went on

    anyio.run(main, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_no_workers_is_nothing_to_wait_for(backend: str) -> None:
    async def main() -> None:
        async with anyio.create_task_group() as tg:
            await fan_out(Crew(1).work, 0, tg)

    anyio.run(main, backend=backend)
