"""Work in other processes: how they are started, and independent checks run in worker
processes with their results taken in order (`prepared_in_order` for the bulk imports).

A bulk `import` checks each bundle on its own (the file alone decides whether it verifies),
so the bundles after the one being written can be checked meanwhile on other CPUs. The
results come back in the order of the jobs, at most `window` of them ahead of the caller,
so memory holds a few checked bundles, not all of them.
"""

from __future__ import annotations

import math
import threading
from collections import deque
from collections.abc import Callable, Collection, Generator, Sequence
from typing import Any

Job = tuple[Any, ...]


def results_in_order(
    fn: Callable[..., Any], jobs: Sequence[Job], workers: int, window: int
) -> Generator[tuple[bool, Any], None, None]:
    """(True, fn(*job)) for each job in order, `fn` run in `workers` processes with at most
    `window` jobs given out ahead of the caller; (False, None) for a job that did not come
    back (a pool that would not start, a worker that died, something that would not
    pickle, an exception raised by `fn`), which the caller then does itself, and so meets
    that failure itself. Leaving the loop early cancels the jobs not started and waits for
    those under way."""
    from concurrent.futures import ProcessPoolExecutor

    try:
        pool = ProcessPoolExecutor(max_workers=workers, mp_context=process_context())
    except (OSError, ValueError):
        yield from ((False, None) for _ in jobs)
        return
    pending: deque[Any] = deque()
    given = 0
    try:
        for _ in jobs:
            while given < len(jobs) and len(pending) < window:
                try:
                    pending.append(pool.submit(fn, *jobs[given]))
                except Exception:  # a pool that broke
                    pending.append(None)
                given += 1
            future = pending.popleft()
            try:
                result = (True, future.result()) if future is not None else (False, None)
            except Exception:
                result = (False, None)
            yield result
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def prepared_in_order(
    jobs: Sequence[Job],
    prepare: Callable[..., Any],
    apart: Callable[..., Any],
    accept: Callable[[Any], Any] | None,
    workers: int,
    here: Collection[int] = (),
) -> Generator[Any, None, None]:
    """`prepare(*job)` for each job in order, for a caller that writes each result as it
    comes: this process prepares the jobs at the positions in `here` (all of them without
    workers or with one job), and `workers` processes run `apart(*job)` for the others,
    each outcome taken through `accept` when given (None: the job is prepared here after
    all, so a failure reads as it does in one process; `accept` may raise). Closing the
    generator early (the caller's refusal) stops the workers before it returns."""
    if workers <= 0 or len(jobs) <= 1:
        here = range(len(jobs))
    apart_jobs = [job for at, job in enumerate(jobs) if at not in here]
    outcomes = results_in_order(apart, apart_jobs, workers, 2 * workers) if apart_jobs else None
    try:
        for at, job in enumerate(jobs):
            prepared = None
            if outcomes is not None and at not in here:
                done, outcome = next(outcomes, (False, None))
                if done:
                    prepared = outcome if accept is None else accept(outcome)
            yield prepare(*job) if prepared is None else prepared
    finally:
        if outcomes is not None:
            outcomes.close()


def done_here(jobs: int, workers: int, cost_here: float) -> set[int]:
    """The jobs the calling process does itself, spread evenly from the first (which it does
    while the workers start), when it also spends `cost_here` of one job's work on every
    job's result (writing it): all of them without workers, else the share p that keeps it
    as busy as each worker, from cost_here + p = (1 - p) / workers. With a write a fifth of
    a job: 40% beside one worker, 20% beside two, none from five."""
    if workers <= 0:
        return set(range(jobs))
    share = max(0.0, (1 / workers - cost_here) / (1 + 1 / workers))
    return {i for i in range(jobs) if math.floor(i * share) > math.floor((i - 1) * share)}


def process_context() -> Any:
    """The multiprocessing context every worker process starts in: `fork` where this
    process runs one thread (a fork copies only the calling thread, and starts in
    milliseconds), else `spawn`."""
    import multiprocessing

    method = "fork" if threading.active_count() == 1 else "spawn"
    if method not in multiprocessing.get_all_start_methods():
        method = "spawn"
    return multiprocessing.get_context(method)
