"""set_worker_threads: the pool of a read or flush resized at run time (a Spark task sizes it to
its cores, jobs.common.size_to_task)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from lance_ops.file import parallel


@pytest.fixture
def restore() -> Iterator[None]:
    before = parallel.WORKER_THREADS
    yield
    parallel.set_worker_threads(before)


@pytest.mark.usefixtures("restore")
def test_one_thread_runs_every_task_on_the_caller() -> None:
    assert parallel.set_worker_threads(1) >= 1
    caller = threading.get_ident()
    assert parallel.run_tasks([threading.get_ident for _ in range(6)]) == [caller] * 6


@pytest.mark.usefixtures("restore")
@pytest.mark.parametrize("threads", [2, 3, 5])
def test_the_pool_is_rebuilt_at_the_new_size(threads: int) -> None:
    parallel.set_worker_threads(1)  # drops a pool another test may have left at another size
    parallel.set_worker_threads(2)
    assert parallel.run_tasks([lambda i=i: i * i for i in range(8)]) == [i * i for i in range(8)]
    assert parallel.set_worker_threads(threads) == 2
    assert parallel.WORKER_THREADS == threads
    assert parallel._workers()._max_workers == threads - 1  # the caller is the other thread
    assert parallel.run_tasks([lambda i=i: -i for i in range(8)]) == [-i for i in range(8)]


def test_at_least_one_thread() -> None:
    before = parallel.WORKER_THREADS
    with pytest.raises(ValueError, match="at least 1"):
        parallel.set_worker_threads(0)
    assert parallel.WORKER_THREADS == before
