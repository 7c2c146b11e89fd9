"""Run one scenario: deploy the world, play a night, inject its faults and bad input at seeded
random moments, wait (bounded) for the pipeline to settle by itself, count, check.

The runner never redrives, reconciles or repairs anything: recovery must need no manual step.
"Settled" means every CCD handed off is registered once, announced and acknowledged, every bad
input has its quarantine record and the outbox is empty; then a quiet period must pass with
nothing changing (a late duplicate would show). The time to settle is counted from the moment
the last fault was healed and the night was over.
"""

from __future__ import annotations

import logging
import random
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from tests.chaos import bad_input
from tests.chaos.accounting import Tally, count
from tests.chaos.bad_input import BadInput
from tests.chaos.faults import Fault, Kill, Nested
from tests.chaos.world import DAY_OBS, INSTRUMENT, World, WorldOptions
from tests.integration.fixtures.private_stack import PrivateStack

log = logging.getLogger("obsingest.chaos")

#: the services of a scenario's own (Kafka too for the Kafka scenarios)
F = TypeVar("F")

SERVICES = ["pubsub", "gcs", "postgres"]
#: nothing may change for this long once settled (late duplicates would show)
QUIET_SECONDS = 6.0


@dataclass(frozen=True)
class Night:
    exposures: int
    detectors: int
    interval: float

    @property
    def ccds(self) -> int:
        return self.exposures * self.detectors

    @property
    def seconds(self) -> float:
        return self.exposures * self.interval


#: plan(rng, night) -> [(seconds after the night starts, fault), ...]
Plan = Callable[[random.Random, Night], list[tuple[float, Fault]]]


@dataclass(frozen=True)
class Scenario:
    name: str
    what: str  # one line for the report
    plan: Plan
    night: Night
    reduced: Night | None = None  # None: not part of the reduced suite (make test)
    options: WorldOptions = field(default_factory=WorldOptions)
    bad: tuple[int, int] = (3, 2)  # bad notifications, bad files
    checks: tuple[Callable[[Run], None], ...] = ()
    settle_timeout: float = 240.0
    #: every CCD announced exactly once (no fault here may cause a redelivery)
    exactly_once_announcements: bool = False
    kafka: bool = False

    def night_for(self, reduced: bool) -> Night:
        return self.reduced if reduced and self.reduced is not None else self.night


@dataclass
class Run:
    scenario: Scenario
    seed: int
    reduced: bool
    world: World
    night: Night
    faults: list[tuple[float, Fault]] = field(default_factory=list)
    bad: list[tuple[float, BadInput]] = field(default_factory=list)
    sent: set[str] = field(default_factory=set)
    started_wall: float = 0.0
    night_over: float = 0.0
    healed: float = 0.0
    settle_seconds: float | None = None
    recovered: bool = False
    edge_exit: int | None = None
    edge_health: dict[str, Any] | None = None  # just before the SIGTERM
    tally: Tally = field(default_factory=Tally)
    failures: list[str] = field(default_factory=list)
    events: list[str] = field(default_factory=list)

    def note(self, text: str) -> None:
        stamp = time.time() - self.started_wall if self.started_wall else 0.0
        self.events.append(f"{stamp:7.1f}s {text}")
        log.info("%s: %s", self.scenario.name, text)

    def check(self, ok: bool, message: str) -> None:
        if not ok:
            self.failures.append(message)

    @property
    def passed(self) -> bool:
        return not self.failures

    def fault_of(self, kind: type[F]) -> list[F]:
        """The faults of ``kind``, those nested in another one included."""
        found: list[F] = []
        for _, fault in self.faults:
            for f in (fault, getattr(fault, "outer", None), getattr(fault, "inner", None)):
                if isinstance(f, kind):
                    found.append(f)
        return found


def spread(rng: random.Random, n: int, lo: float, hi: float, gap: float) -> list[float]:
    """``n`` sorted random moments in [lo, hi], at least ``gap`` apart (as far as they fit)."""
    points = sorted(rng.uniform(lo, hi) for _ in range(n))
    for i in range(1, n):
        points[i] = max(points[i], points[i - 1] + gap)
    return points


def run_scenario(
    scenario: Scenario,
    seed: int,
    workdir: Path,
    reduced: bool = False,
    stack: PrivateStack | None = None,
    kafka: PrivateStack | None = None,
) -> Run:
    """Play ``scenario``; on ``stack`` (and ``kafka``) if given, else on services of its own,
    started for it and stopped after it (then it may run beside other scenarios)."""
    rng = random.Random(f"{seed}:{scenario.name}")
    night = scenario.night_for(reduced)
    own: list[PrivateStack] = []
    try:
        if stack is None:
            stack = PrivateStack(SERVICES).up()
            own.append(stack)
        if scenario.kafka and kafka is None:
            kafka = PrivateStack(["kafka"]).up(timeout=180)
            own.append(kafka)
    except Exception:
        for service in own:
            service.down()
        raise
    world = World(scenario.name, stack, workdir, scenario.options, kafka=kafka)
    run = Run(scenario, seed, reduced, world, night)
    try:
        with stack.use():
            _run(run, rng)
    except Exception as exc:  # a harness or pipeline failure: reported, never hidden
        run.failures.append(f"{type(exc).__name__}: {exc}\n{traceback.format_exc()[-2000:]}")
    finally:
        world.close()
        for service in own:  # the stack still manages what the faults crashed and restarted
            run.failures += stop_stack(service)
    return run


def stop_stack(stack: PrivateStack) -> list[str]:
    """Stop a private stack; what went wrong (every service it started must stop and its port
    close, whatever the faults did to it: PostgreSQL restarted by a crash under a new pid)."""
    from infra.local.stack.process import port_open

    ports = {name: getattr(stack.settings, f"{name}_port") for name in stack.services}
    stopped = stack.down()
    log.info("private services stopped: %s", stopped)
    problems = [f"{name} was not stopped by its stack" for name in ports if name not in stopped]
    problems += [
        f"{name} still listens on {port}" for name, port in ports.items() if port_open("127.0.0.1", port)
    ]
    return problems


def _run(run: Run, rng: random.Random) -> None:
    world, night, scenario = run.world, run.night, run.scenario
    world.start()
    run.faults = scenario.plan(rng, night)
    bad = bad_input.draw(rng, world.bucket, *scenario.bad)
    run.bad = [(rng.uniform(1.0, night.seconds + 5.0), b) for b in bad]
    # a CCD journalled and then gone: injected by an edge kill, while the edge is down
    run.bad += [(0.0, f.vanished) for f in run.fault_of(Kill) if f.vanished is not None]
    from producers.daq.simulator import INSTRUMENTS

    detectors = INSTRUMENTS[INSTRUMENT].detector_ids[: night.detectors]
    run.sent = {
        f"{INSTRUMENT}/{DAY_OBS * 100_000 + seq}/{det:03d}"
        for seq in range(1, night.exposures + 1)
        for det in detectors
    }
    run.started_wall = time.time()
    run.note(
        f"night: {night.exposures} exposures x {night.detectors} CCDs every "
        f"{night.interval:g} s; seed {run.seed}"
    )
    world.play(night.exposures, night.detectors, night.interval)
    start = time.monotonic()
    threads = [
        threading.Thread(target=_fault_loop, args=(run, start), name="faults", daemon=True),
        threading.Thread(target=_bad_loop, args=(run, start), name="bad", daemon=True),
    ]
    for thread in threads:
        thread.start()
    assert world.daq is not None
    code = world.daq.wait(timeout=night.seconds + 300)
    run.check(code == 0, f"the DAQ night player exited {code}: {world.daq.tail(1000)}")
    run.night_over = time.monotonic()
    run.note("night over")
    for thread in threads:
        thread.join(timeout=900)
        run.check(not thread.is_alive(), f"{thread.name} still running")
    run.healed = max(run.night_over, time.monotonic())
    _settle(run)
    assert world.edge is not None
    run.edge_health = world.edge.health()
    run.edge_exit = world.edge.terminate()  # SIGTERM: drains and exits cleanly
    for check in scenario.checks:
        try:
            check(run)
        except AssertionError as exc:
            run.failures.append(f"{check.__name__}: {exc}")
    _verdict(run)


def _fault_loop(run: Run, start: float) -> None:
    for at, fault in run.faults:
        _sleep_until(start + at)
        try:
            fault.injected_at = time.time()
            fault.inject(run.world)
            run.note(f"inject {fault.label}")
            if fault.duration and not isinstance(fault, Nested):  # a Nested one sleeps itself
                time.sleep(fault.duration)
            fault.heal(run.world)
            fault.healed_at = time.time()
            run.note(f"healed {fault.label}")
        except Exception as exc:
            run.failures.append(
                f"fault {fault.label}: {type(exc).__name__}: {exc}\n{traceback.format_exc()[-1500:]}"
            )
            run.note(f"fault {fault.label} failed: {exc}")


def _bad_loop(run: Run, start: float) -> None:
    for at, item in sorted(((a, b) for a, b in run.bad if b.kind != "vanished"), key=lambda pair: pair[0]):
        _sleep_until(start + at)
        try:
            bad_input.inject(run.world, item)
            run.note(f"bad input {item.kind}" + (f" ({item.note})" if item.note else ""))
        except Exception as exc:
            run.failures.append(f"bad input {item.kind}: {type(exc).__name__}: {exc}")


def _sleep_until(moment: float) -> None:
    left = moment - time.monotonic()
    if left > 0:
        time.sleep(left)


def _settle(run: Run) -> None:
    """Poll until settled, then until quiet; bounded by the scenario's settle timeout."""
    deadline = run.healed + run.scenario.settle_timeout
    bad = [b for _, b in run.bad]
    tally = _count(run, bad, Tally())
    while not tally.settled and time.monotonic() < deadline:
        time.sleep(1.0)
        tally = _count(run, bad, tally)
    run.recovered = tally.settled
    if tally.settled:
        run.settle_seconds = time.monotonic() - run.healed
        run.note(f"settled in {run.settle_seconds:.1f} s")
        quiet_since, last = time.monotonic(), tally.progress()
        while time.monotonic() - quiet_since < QUIET_SECONDS:
            time.sleep(1.0)
            tally = _count(run, bad, tally)
            if tally.progress() != last:
                quiet_since, last = time.monotonic(), tally.progress()
    else:
        run.note(f"NOT settled after {run.scenario.settle_timeout:.0f} s: {tally.line()}")
    run.tally = tally


def _count(run: Run, bad: list[BadInput], previous: Tally) -> Tally:
    """The tally now; the previous one when a service the count reads is away this moment."""
    try:
        return count(run.world, run.sent, bad)
    except Exception as exc:
        run.note(f"count failed (tried again): {type(exc).__name__}: {exc}"[:300])
        return previous


def _verdict(run: Run) -> None:
    t = run.tally
    run.check(
        run.recovered,
        f"did not settle within {run.scenario.settle_timeout:.0f} s without a manual step: {t.line()}",
    )
    run.check(not t.lost, f"lost {len(t.lost)}: {t.lost[:10]}")
    run.check(not t.doubled, f"doubled {len(t.doubled)}: {t.doubled[:10]}")
    run.check(not t.unaccounted, f"bad input unaccounted: {t.unaccounted}")
    run.check(not t.unexpected_quarantine, f"unexpected quarantine: {t.unexpected_quarantine}")
    run.check(not t.unexpected_datasets, f"datasets nobody sent: {t.unexpected_datasets[:10]}")
    run.check(run.edge_exit == 0, f"the edge exited {run.edge_exit} on SIGTERM")
    if run.scenario.exactly_once_announcements:
        run.check(
            t.duplicate_announcements == 0,
            f"{t.duplicate_announcements} duplicate announcements where none may be",
        )


def summary(run: Run) -> dict[str, Any]:
    """The scenario's row for the report."""
    t = run.tally
    return {
        "scenario": run.scenario.name,
        "what": run.scenario.what,
        "faults": [f"{at:.0f}s {f.label}" for at, f in run.faults],
        "sent": t.sent,
        "bad_sent": t.bad_sent,
        "registered_once": t.registered_once,
        "announced": t.announced,
        "lost": len(t.lost),
        "doubled": len(t.doubled),
        "duplicate_announcements": t.duplicate_announcements,
        "quarantined": dict(sorted(t.quarantined.items())),
        "unaccounted": len(t.unaccounted),
        "recovered": run.recovered,
        "settle_seconds": round(run.settle_seconds, 1) if run.settle_seconds is not None else None,
        "passed": run.passed,
        "failures": run.failures,
        "seed": run.seed,
        "reduced": run.reduced,
        "events": run.events,
        "logs": str(run.world.logs),
    }
