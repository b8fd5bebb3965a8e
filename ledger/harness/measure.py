"""Like-for-like timing: a candidate and its reference measured interleaved in one session.

A round is trustworthy only when both of its sides were measured the same way, on the same
device, at the same time. This module does that and nothing else; it imports nothing from the
rest of kernel-ledger (only the standard library, and torch where the CUDA timer is used), so
it can be copied to a machine where kernel-ledger is not installed
(`kernel-ledger skill install` ships it as `scripts/measure.py`).

    from measure import Harness

    harness = Harness()                       # CUDA events, L2 flushed by a read
    for case_id, (cand, ref) in cases.items():
        harness.add_case(case_id, candidate=cand, reference=ref)   # zero-argument callables
    result = harness.run(repeats=50)          # or run(min_repeats=10, max_repeats=100,
                                              #        batch=10, until=...)
    fragment = result.write("runs/r1/raw", reference_sha256=parent_sha)
    # fragment = {"session": ..., "measurements": [...], "reference": {...}}: merge it into
    # the round result file that `kernel-ledger record` takes.

How it measures, and why:

* **Interleaved.** Every sample of every case is taken from both kernels back to back, in
  alternating order (candidate-reference, then reference-candidate), so that slow drift of
  clocks, temperature or a neighbour's load lands on both sides alike. Sessions can differ by
  far more than the change under test (a small case has run 2x slower in one fresh session
  than in another on the same GPU model), so a side measured in another session is no
  reference at all.
* **L2 flushed by a read, not a write.** Before each sample a buffer larger than the L2 is
  read (summed). Zero-filling it, as `triton.testing.do_bench` does, leaves the L2 full of
  dirty lines that the timed kernel then pays to write back (4.5 us on a 67 us kernel in one
  measurement on an H200).
* **One sample = one launch between two CUDA events**, collected per batch with one
  synchronisation; the flush is outside the events. Between the flush and the first event
  the GPU spins for a moment (`torch.cuda._sleep`), so that the launch is queued before the
  GPU reaches the event: a kernel of a few microseconds timed from an empty queue also times
  the host's launch delay (on an H200, 7 us kernels read 7-33 us in one session without it).
* **A discarded first pass.** After the warm-up, one interleaved sample of every case is
  taken and thrown away: the first timed launch of a case has read 200 us for a 8 us kernel.
* **In batches.** `run(..., batch=N, until=f)` measures N samples per case per kernel at a
  time and asks `f` after each batch whether the round is settled (for instance through
  `kernel-ledger decide` with the run's `statistics.sequential`); samples are kept in the
  order they were taken, which is the order a sequential rule looks at them in.
* **The session is recorded**: an id, the device (GPU uuid where torch reports one), the host
  and the start time, written with every sample file and into the round's fragment.

The "wall" timer (time.perf_counter_ns, no flush) is for kernels that run on the host (numpy,
a CPU build) and for machines without a GPU, such as Triton's interpreter
(TRITON_INTERPRET=1) in tests, whose numbers are no evidence of device speed; the files say
which timer made them. A host call of a few microseconds timed alone reads mostly the
timer and the call's own start-up (cold single calls of a 20 us numpy kernel spread over
15-40% CV), so one wall sample is the mean of `calls_per_sample` back-to-back calls: by
default (`calls_per_sample=None`) the smallest of 1, 2, 5, 10, 20, 50, ... calls that take
at least 2 ms together, chosen per case after the warm-up from its slowest kernel, the same
for every kernel of the case. Each measurement row and raw file says how many calls a
sample is of (`calls_per_sample`).
"""

from __future__ import annotations

import json
import os
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

TIMERS = ("cuda", "wall")
WALL_SAMPLE_S = 0.002  # a wall sample lasts at least this long (calls_per_sample=None)
MAX_CALLS_PER_SAMPLE = 100_000
FLUSH_BYTES = 256 * 1024 * 1024  # read before each sample: several times any current L2


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _device_identity(timer: str) -> tuple[str, str | None]:
    """(device id, device name): the GPU's uuid where torch reports one."""
    if timer != "cuda":
        return f"cpu:{socket.gethostname()}", None
    import torch

    index = torch.cuda.current_device()
    props = torch.cuda.get_device_properties(index)
    raw = getattr(props, "uuid", None)
    ident = f"GPU-{raw}" if raw is not None else f"cuda:{index}:{props.name}"
    return ident, props.name


@dataclass(frozen=True)
class Session:
    """Where and when one set of measurements was taken."""

    id: str
    device: str
    host: str
    started_at: str
    device_name: str | None = None
    timer: str = "cuda"
    flush: str = "read"

    def as_dict(self) -> dict[str, Any]:
        out = {"id": self.id, "device": self.device, "host": self.host,
               "started_at": self.started_at, "timer": self.timer, "flush": self.flush}  # fmt: skip
        if self.device_name is not None:
            out["device_name"] = self.device_name
        return out


class _CudaClock:
    """Times single launches between CUDA events; reads a large buffer before each."""

    def __init__(self, flush_bytes: int) -> None:
        import torch

        self.torch = torch
        self.buffer = (
            torch.empty(flush_bytes // 4, dtype=torch.float32, device="cuda").fill_(1.0)
            if flush_bytes
            else None
        )
        self.pending: list[tuple[Any, Any, list[float]]] = []

    def flush(self) -> None:
        if self.buffer is not None:
            self.buffer.sum()  # a read: the L2 ends full of clean lines

    SPIN_CYCLES = 200_000
    """GPU cycles spun before each sample (about 0.1 ms at 2 GHz): longer than a launch takes
    on the host, so the timed launch is already queued when its first event is reached."""

    def sample(self, fn: Callable[[], Any], into: list[float]) -> None:
        torch = self.torch
        self.flush()
        sleep = getattr(torch.cuda, "_sleep", None)
        if sleep is not None:
            sleep(self.SPIN_CYCLES)
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        self.pending.append((start, end, into))

    def collect(self) -> None:
        self.torch.cuda.synchronize()
        for start, end, into in self.pending:
            into.append(start.elapsed_time(end) * 1000.0)  # ms -> us
        self.pending.clear()

    def settle(self, seconds: float) -> None:
        """Keep the GPU busy for a moment so clocks leave their idle state."""
        torch = self.torch
        deadline = time.perf_counter() + seconds
        x = torch.ones(1 << 22, device="cuda")
        while time.perf_counter() < deadline:
            for _ in range(20):
                x.mul_(1.0)
            torch.cuda.synchronize()


class _WallClock:
    """perf_counter around `calls` back-to-back calls, the mean their sample: for host
    kernels and machines without a GPU."""

    def flush(self) -> None:
        return None

    def sample(self, fn: Callable[[], Any], into: list[float], calls: int = 1) -> None:
        start = time.perf_counter_ns()
        for _ in range(calls):
            fn()
        into.append((time.perf_counter_ns() - start) / 1000.0 / calls)

    @staticmethod
    def calls_for(kernels: list[Callable[[], Any]]) -> int:
        """The smallest of 1, 2, 5, 10, 20, ... calls of the slowest kernel that take at
        least WALL_SAMPLE_S together (the slowest: a candidate 100x slower than its
        reference must not take 100x the time per sample)."""
        steps = (1, 2, 5)
        scale = 1
        while True:
            for step in steps:
                calls = step * scale
                slowest = max(_timed(fn, calls) for fn in kernels)
                if slowest >= WALL_SAMPLE_S or calls >= MAX_CALLS_PER_SAMPLE:
                    return calls
            scale *= 10

    def collect(self) -> None:
        return None

    def settle(self, seconds: float) -> None:
        return None


def _timed(fn: Callable[[], Any], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return time.perf_counter() - start


@dataclass
class Result:
    """Samples per role and case, in the order they were taken, and the session."""

    session: Session
    case_ids: list[str]
    samples: dict[str, dict[str, list[float]]]  # role -> case -> samples (us)
    batches: int = 0
    looks: list[dict[str, Any]] = field(default_factory=list)  # what `until` answered
    calls_per_sample: dict[str, int] = field(default_factory=dict)  # wall timer: per case

    @property
    def repeats(self) -> int:
        return min(len(s) for per_case in self.samples.values() for s in per_case.values())

    def measurements(self, role: str, raw_dir: Path | None = None) -> list[dict[str, Any]]:
        rows = []
        for case_id in self.case_ids:
            values = self.samples[role][case_id]
            row: dict[str, Any] = {"case_id": case_id, "repeats": len(values),
                                   "samples_us": list(values)}  # fmt: skip
            if case_id in self.calls_per_sample:
                row["calls_per_sample"] = self.calls_per_sample[case_id]
            if raw_dir is not None:
                row["source"] = str(raw_dir / role / f"{_file_name(case_id)}.json")
            rows.append(row)
        return rows

    def fragment(
        self, reference_sha256: str | None = None, raw_dir: Path | None = None
    ) -> dict[str, Any]:
        """The round result's `session`, `measurements` and `reference` keys."""
        out: dict[str, Any] = {
            "session": self.session.as_dict(),
            "measurements": self.measurements("candidate", raw_dir),
        }
        if "reference" in self.samples:
            reference: dict[str, Any] = {"measurements": self.measurements("reference", raw_dir)}
            if reference_sha256 is not None:
                reference = {"kernel_sha256": reference_sha256, **reference}
            out["reference"] = reference
        return out

    def write(
        self, raw_dir: str | os.PathLike[str], reference_sha256: str | None = None
    ) -> dict[str, Any]:
        """Write one raw samples file per role and case under `raw_dir`
        (`{"unit": "us", "samples": [...], "session": ...}`) and return the fragment, whose
        `source` paths name them."""
        folder = Path(raw_dir)
        for role, per_case in self.samples.items():
            (folder / role).mkdir(parents=True, exist_ok=True)
            for case_id, values in per_case.items():
                document = {
                    "unit": "us",
                    "samples": list(values),
                    "case_id": case_id,
                    "role": role,
                    "session": self.session.as_dict(),
                }
                if case_id in self.calls_per_sample:
                    document["calls_per_sample"] = self.calls_per_sample[case_id]
                path = folder / role / f"{_file_name(case_id)}.json"
                path.write_text(json.dumps(document, indent=1) + "\n")
        return self.fragment(reference_sha256, folder)


def _file_name(case_id: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in case_id) or "case"


class Harness:
    """Measures registered cases, every kernel of a case interleaved with the others."""

    def __init__(
        self,
        timer: str | None = None,
        flush_bytes: int = FLUSH_BYTES,
        session_id: str | None = None,
        settle_seconds: float = 0.5,
        calls_per_sample: int | None = None,
    ) -> None:
        if timer is None:
            timer = "cuda" if _cuda_available() else "wall"
        if timer not in TIMERS:
            raise ValueError(f"timer must be one of {', '.join(TIMERS)}, not {timer!r}")
        if calls_per_sample is not None:
            if isinstance(calls_per_sample, bool) or not isinstance(calls_per_sample, int):
                raise ValueError("calls_per_sample must be a whole number or None")
            if not 1 <= calls_per_sample <= MAX_CALLS_PER_SAMPLE:
                raise ValueError(f"calls_per_sample must be 1 to {MAX_CALLS_PER_SAMPLE}")
            if timer == "cuda" and calls_per_sample != 1:
                raise ValueError(
                    "calls_per_sample is for the wall timer: a CUDA sample is one launch, "
                    "the L2 flushed before it"
                )
        self.calls_per_sample = calls_per_sample
        self.timer = timer
        self.clock = _CudaClock(flush_bytes) if timer == "cuda" else _WallClock()
        device, name = _device_identity(timer)
        self.session = Session(
            id=session_id or f"s-{uuid.uuid4().hex[:12]}",
            device=device,
            host=socket.gethostname(),
            started_at=utc_now(),
            device_name=name,
            timer=timer,
            flush="read" if timer == "cuda" and flush_bytes else "none",
        )
        self.settle_seconds = settle_seconds
        self.cases: dict[str, dict[str, Callable[[], Any]]] = {}

    def add_case(
        self,
        case_id: str,
        candidate: Callable[[], Any],
        reference: Callable[[], Any] | None = None,
    ) -> None:
        """Register one planned case: zero-argument callables that launch each kernel once
        on prepared inputs (allocate outside them)."""
        if case_id in self.cases:
            raise ValueError(f"case {case_id!r} is registered twice")
        kernels = {"candidate": candidate}
        if reference is not None:
            kernels["reference"] = reference
        if self.cases and set(kernels) != set(next(iter(self.cases.values()))):
            raise ValueError("every case needs the same kernels (a reference for all or none)")
        self.cases[case_id] = kernels

    def run(
        self,
        repeats: int | None = None,
        *,
        min_repeats: int | None = None,
        max_repeats: int | None = None,
        batch: int = 10,
        warmup: int = 3,
        until: Callable[[Result], int | None] | None = None,
    ) -> Result:
        """Measure every case. With `repeats`, exactly that many samples per case and kernel.
        Otherwise batches of `batch` from `min_repeats` up to `max_repeats`; after each batch
        that reaches `min_repeats`, `until(result)` says how many more samples per case the
        rule needs (0 or None: settled, stop)."""
        if not self.cases:
            raise ValueError("no case registered")
        if repeats is not None:
            if min_repeats is not None or max_repeats is not None or until is not None:
                raise ValueError("give either repeats or min_repeats/max_repeats/until")
            min_repeats = max_repeats = repeats
        if max_repeats is None or max_repeats < 1 or batch < 1:
            raise ValueError("max_repeats and batch must be at least 1")
        min_repeats = max_repeats if min_repeats is None else min_repeats
        if not 1 <= min_repeats <= max_repeats:
            raise ValueError("need 1 <= min_repeats <= max_repeats")
        roles = list(next(iter(self.cases.values())))
        result = Result(
            session=self.session,
            case_ids=list(self.cases),
            samples={role: {c: [] for c in self.cases} for role in roles},
        )
        self.clock.settle(self.settle_seconds)
        for kernels in self.cases.values():  # compile and warm every kernel before timing
            for fn in kernels.values():
                for _ in range(warmup):
                    fn()
        self.clock.collect()
        if isinstance(self.clock, _WallClock):
            for case_id, kernels in self.cases.items():
                result.calls_per_sample[case_id] = self.calls_per_sample or self.clock.calls_for(
                    list(kernels.values())
                )
        self._batch(result, 1, 0)  # the discarded first pass
        for by_case in result.samples.values():
            for samples in by_case.values():
                samples.clear()
        target = min_repeats
        taken = 0
        while taken < target:
            step = min(batch, target - taken, max_repeats - taken)
            self._batch(result, step, taken)
            taken += step
            result.batches += 1
            if taken < target:
                continue
            if until is None or taken >= max_repeats:
                break
            more = until(result) or 0
            result.looks.append({"repeats": taken, "more_repeats": int(more)})
            if more <= 0:
                break
            target = min(max_repeats, taken + int(more))
        return result

    def _batch(self, result: Result, count: int, offset: int) -> None:
        for index in range(offset, offset + count):
            for case_id, kernels in self.cases.items():
                order = list(kernels.items())
                if index % 2:
                    order.reverse()
                calls = result.calls_per_sample.get(case_id)
                for role, fn in order:
                    if calls is None:
                        self.clock.sample(fn, result.samples[role][case_id])
                    else:
                        self.clock.sample(fn, result.samples[role][case_id], calls)
        self.clock.collect()


def _cuda_available() -> bool:
    if os.environ.get("TRITON_INTERPRET") == "1":
        return False
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())
