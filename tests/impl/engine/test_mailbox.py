"""The engines' mailbox: its wake-ups on each backend, cancellation, and `take_ready`."""

from __future__ import annotations

import anyio
import pytest

from beebox_impl.engine.mailbox import Mailbox, PullIterator
from beebox_spec.errors import InvariantError

pytestmark = pytest.mark.anyio


async def test_a_waiting_reader_gets_every_item_put_in_order() -> None:
    mailbox: Mailbox[int] = Mailbox()
    got: list[int] = []

    async def read(count: int) -> None:
        for _ in range(count):
            got.append(await mailbox.get())

    async with anyio.create_task_group() as group:
        group.start_soon(read, 5)
        await anyio.wait_all_tasks_blocked()
        # Several puts before the reader runs: one wake-up, every item, in order.
        for item in range(3):
            mailbox.put(item)
        await anyio.wait_all_tasks_blocked()
        mailbox.put(3)
        mailbox.put(4)
    assert got == [0, 1, 2, 3, 4]


async def test_a_cancelled_wait_leaves_the_mailbox_usable() -> None:
    mailbox: Mailbox[str] = Mailbox()
    with anyio.move_on_after(0.01) as scope:
        await mailbox.get()
    assert scope.cancelled_caught
    # The cancelled wait's wake-up is spent: the next reader waits on its own, and
    # a put wakes it.
    got: list[str] = []

    async def read() -> None:
        got.append(await mailbox.get())

    with anyio.fail_after(1):
        async with anyio.create_task_group() as group:
            group.start_soon(read)
            await anyio.wait_all_tasks_blocked()
            mailbox.put("after")
    assert got == ["after"]

    async def close_later() -> None:
        await anyio.wait_all_tasks_blocked()
        mailbox.close()

    async with anyio.create_task_group() as group:
        group.start_soon(close_later)
        with pytest.raises(anyio.EndOfStream):
            await mailbox.get()


async def test_take_ready_hands_over_what_waits_and_never_the_end() -> None:
    mailbox: Mailbox[int] = Mailbox()
    assert mailbox.take_ready() is None
    mailbox.put(1)
    mailbox.close()
    assert mailbox.take_ready() == 1
    assert mailbox.take_ready() is None
    with pytest.raises(anyio.EndOfStream):
        await mailbox.get()

    async def pull() -> int:
        return await mailbox.get()

    assert PullIterator(pull).take_ready() is None


async def test_take_all_hands_over_everything_waiting_in_order_and_never_the_end() -> None:
    mailbox: Mailbox[int] = Mailbox()
    assert mailbox.take_all() == []
    for item in (1, 2, 3):
        mailbox.put(item)
    assert mailbox.take_all() == [1, 2, 3]
    assert len(mailbox) == 0
    mailbox.put(4)
    mailbox.close()
    assert mailbox.take_all() == [4]
    assert mailbox.take_all() == []
    with pytest.raises(anyio.EndOfStream):
        await mailbox.get()


async def test_none_is_not_an_item() -> None:
    mailbox: Mailbox[int | None] = Mailbox()
    with pytest.raises(InvariantError):
        mailbox.put(None)
    with pytest.raises(InvariantError):
        mailbox.offer(None, 10)
    assert len(mailbox) == 0


async def test_offer_queues_below_the_limit_and_refuses_full_or_closed() -> None:
    mailbox: Mailbox[int] = Mailbox()
    got: list[int] = []

    async def read() -> None:
        got.append(await mailbox.get())

    async with anyio.create_task_group() as group:
        group.start_soon(read)
        await anyio.wait_all_tasks_blocked()
        # An offer wakes a waiting reader as a put does.
        assert mailbox.offer(1, 2)
    assert got == [1]
    assert mailbox.offer(2, 2)
    assert mailbox.offer(3, 2)
    assert not mailbox.offer(4, 2)
    assert len(mailbox) == 2
    mailbox.take_ready()
    mailbox.close()
    assert not mailbox.offer(5, 2)
    assert mailbox.take_ready() == 3
    assert mailbox.take_ready() is None
