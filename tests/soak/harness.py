"""The soak: N exposures x 205 LSSTCam CCDs at a cadence (Rubin's 17 s, or compressed for CI)
through edge -> GCS emulator -> Pub/Sub emulator -> relay spread over two (``--instances``)
register-function instances -> PostgreSQL, the facility service on, and one register-function
instance SIGKILLed inside each of ``kills`` exposure bursts chosen at random from a printed seed.

Built from the chaos suite's parts (``tests.chaos``: the World of real processes on private
services, the Kill fault, the settle-and-count accounting, the verdict), with what the soak adds:

- more register-function instances, and the relay pushing to all (``--push-url`` each:
  ``infra/local/relay/spread.py`` fails a delivery over to a live one at once);
- a kill triggered by the burst itself: when the exposure's first CCD file appears in the
  hand-off directory, after a random 0.2-1.0 s, so it lands while that exposure's CCDs flow;
  the killed instance is started again at a lower CPU priority until it is ready
  (``InstanceKill``: deployed, a new instance starts on other hardware; the report says so);
- processes that read and write byte-compiled modules, as the deployed images do
  (``SoakWorld.base_env``);
- an observer that keeps every announcement's readout and published times: per CCD readout ->
  announced, per exposure its last CCD;
- CPU seconds of every process of each role (sampled from /proc by process group, so a killed
  instance's CPU up to its death counts), per CCD;
- the facility's CPU per pass, beside ``benchmarks/facility.py``'s 5k / 50k-object figures
  projected to a night of 200,000 objects.

Counting (lost, doubled) is the chaos suite's: from the registry, the bucket, the edge journal
and the announcements, never from what a process says about itself.

One cohesive concept, hence its length: one soak run, from its world and faults to the figures
and the section it writes, so what is measured and how it is reported are read in one place.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from obsingest.registry.completeness import percentile
from tests.chaos.faults import Kill
from tests.chaos.observer import ArrivalsObserver
from tests.chaos.runner import Night, Run, Scenario, _settle, _verdict, summary
from tests.chaos.world import DAY_OBS, INSTRUMENT, World, WorldOptions
from tests.integration.fixtures.function_process import FunctionProcess
from tests.integration.fixtures.private_stack import PrivateStack, free_port
from tests.integration.fixtures.service_process import ROOT, ServiceProcess

RESULTS = ROOT / "benchmarks" / "results" / "soak.json"
FACILITY_RESULTS = ROOT / "benchmarks" / "results" / "facility.json"
#: what moved the soak's figures (prose), appended to its section
NOTE = ROOT / "benchmarks" / "notes" / "soak.md"
DETECTORS = 205
#: Rubin's cadence: one exposure every 17 s (15 s exposure + readout + slew)
CADENCE = 17.0
#: a night at Rubin's scale: ~1,000 exposures x 205 CCDs
NIGHT_OBJECTS = 200_000
BUDGET_CCD = 5.0
BUDGET_EXPOSURE = 7.0
#: register-function instances the relay spreads over (``--instances``)
INSTANCES = 2


def instance_names(count: int) -> tuple[str, ...]:
    """``function``, ``function2``, ...: the World's attribute names of the instances."""
    return ("function", *(f"function{i}" for i in range(2, count + 1)))


def roles(instances: int) -> tuple[str, ...]:
    return ("edge", *instance_names(instances), "relay", "facility", "daq")


class SoakWorld(World):
    """The chaos World with more register-function instances and the relay spread over all.

    Its processes read and write byte-compiled modules (``__pycache__``), as the deployed images
    do (built with ``--compile-bytecode``): a shell with ``PYTHONDONTWRITEBYTECODE`` set (this
    sandbox's) over a virtualenv installed without bytecode made every process start compile
    its imports from source, seconds of CPU per start that the pipeline never pays deployed,
    and most of a restarted register-function instance's start-up."""

    #: register-function instances (the World's ``function``, ``function2``, ...)
    instances: int = 2
    #: instances count as started once warm (``warm_up``), not once listening
    warm: bool = True
    #: seconds each instance's warm-up took at start
    warm_up_s: dict[str, float]

    def base_env(self) -> dict[str, str]:
        env = super().base_env()
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        return env

    def start(self) -> SoakWorld:
        super().start()
        assert self.observer is not None and self.relay is not None and self.bus is not None
        self.observer.stop()  # nothing was played yet: an observer that keeps the times instead
        self.observer = ArrivalsObserver(self.project, self.bus.arrivals_topic).start()
        env = self.base_env()
        for name in instance_names(self.instances)[1:]:
            setattr(self, name, FunctionProcess(env, self.logs / f"{name}.log", free_port()))
            getattr(self, name).start(90)
        urls = [
            arg for name in instance_names(self.instances) for arg in ("--push-url", self.process(name).url)
        ]
        self.relay.close()
        self.relay = ServiceProcess(
            "relay", [sys.executable, "-m", "obsingest_cli", "relay", *urls], env, self.logs
        ).start()
        if self.warm:
            self.warm_up_s = {
                name: warm_up(self.process(name).url, self.bucket, name)
                for name in instance_names(self.instances)
            }
        return self

    def close(self) -> None:
        import signal

        for name in instance_names(self.instances)[1:]:
            proc = getattr(self, name, None)
            if proc is not None:
                proc.stop(signal.SIGKILL)
        super().close()


#: the CPU sampler reads all of /proc once in this many samples (new processes of a role)
FULL_SCAN_EVERY = 5


#: a restarted instance's autogroup niceness until ready. Not 19: on this kernel (6.18, EEVDF)
#: a session at +19 beside a few busy ones got a whole core as often as its share (busy loops:
#: 0.8-6.1 CPU s in 6 s against 2.5-3.0 for each of 3 at 0), and starved for a minute under
#: load 7-14; at +10 it got 0.5-0.6 s every time (benchmarks/notes/soak.md)
RESTART_NICE = 10
#: seconds from a kill to the restart, as a supervisor restarting at once would. Longer (e.g. 5 s,
#: a systemd ``RestartSec=5``) starts the replacement after the burst has flowed: a model of
#: production's replacement on other hardware, which shares no CPU with the burst, so the soak
#: measures the failover alone
RESTART_AFTER = 0.5


def _stat_fields(pid: int) -> list[str] | None:
    """/proc/PID/stat's fields after the command name (None once the process is gone)."""
    try:
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY)
    except OSError:
        return None
    try:
        stat = os.read(fd, 4096)
    except OSError:
        return None
    finally:
        os.close(fd)
    return stat[stat.rindex(b")") + 2 :].decode().split()


class CpuSampler:
    """CPU seconds per role: every process of each role's process group, sampled each second
    from /proc (a process's last sample stands for it once it is gone)."""

    def __init__(self, world: SoakWorld) -> None:
        self.world = world
        self.roles = roles(world.instances)
        self.ticks: dict[int, tuple[str, int]] = {}
        self.baseline: dict[int, int] = {}
        self.hz = os.sysconf("SC_CLK_TCK")
        self._samples = 0
        #: (epoch s, role -> CPU ticks of its processes sampled so far): when each role spent
        self.series: list[tuple[float, dict[str, int]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cpu-sampler", daemon=True)

    def start(self) -> CpuSampler:
        """Sample from now on; what the processes spent before (start-up imports) is left out,
        a process started later (an instance restarted after its SIGKILL) counts whole."""
        self.sample()
        self.baseline = {pid: ticks for pid, (_role, ticks) in self.ticks.items()}
        self._thread.start()
        return self

    def stop(self) -> dict[str, float]:
        self.sample()
        self._stop.set()
        self._thread.join(timeout=10)
        out = dict.fromkeys(self.roles, 0.0)
        for pid, (role, ticks) in self.ticks.items():
            out[role] += (ticks - self.baseline.get(pid, 0)) / self.hz
        return {role: round(seconds, 2) for role, seconds in out.items()}

    def _leaders(self) -> dict[int, str]:
        leaders = {}
        for role in self.roles:
            proc = getattr(self.world, role, None)
            popen = getattr(proc, "proc", None)
            if popen is not None and popen.poll() is None:
                leaders[popen.pid] = role
        return leaders

    def sample(self) -> None:
        """Every known process's ticks; the whole of /proc only every ``FULL_SCAN_EVERY``
        samples or when a role's leader is new (a restart): reading every process's stat each
        second cost the harness more CPU than the facility role it measures."""
        leaders = self._leaders()
        self._samples += 1
        full = self._samples % FULL_SCAN_EVERY == 1 or any(p not in self.ticks for p in leaders)
        pids = [int(e.name) for e in os.scandir("/proc") if e.name.isdigit()] if full else list(self.ticks)
        for pid in pids:
            fields = _stat_fields(pid)
            if fields is None:
                continue
            role = leaders.get(int(fields[2]))  # pgrp: every start is a session of its own
            if role is not None:
                self.ticks[pid] = (role, int(fields[11]) + int(fields[12]))
        totals = dict.fromkeys(self.roles, 0)
        for pid, (role, ticks) in self.ticks.items():
            totals[role] += ticks - self.baseline.get(pid, 0)
        self.series.append((time.time(), totals))

    def spent(self, role: str, start: float, end: float) -> float:
        """CPU seconds ``role`` spent between two epoch times (to the samples around them)."""

        def at(when: float) -> int:
            before = [totals[role] for t, totals in self.series if t <= when]
            return before[-1] if before else 0

        return round((at(end) - at(start)) / self.hz, 2)

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            self.sample()


@dataclass
class Soak:
    exposures: int
    interval: float
    kills: int
    seed: int
    kill_log: list[dict[str, Any]] = field(default_factory=list)
    #: a restarted instance's autogroup niceness until ready (0: as the others, for an A/B)
    restart_nice: int = RESTART_NICE
    #: instances are ready once warm (``warm_up``); False: once they listen (for an A/B)
    warm: bool = True
    #: register-function instances the relay spreads over
    instances: int = INSTANCES
    #: seconds from a kill to its instance's restart (a supervisor's delay; ``RESTART_AFTER``)
    restart_after: float = RESTART_AFTER


def obs_dir(handoff: Path, seq: int) -> list[Path]:
    folder = handoff / str(DAY_OBS)
    return list(folder.glob(f"*_{DAY_OBS}_{seq:06d}")) if folder.exists() else []


#: at most this long at that niceness: on a machine busy with other work (shared CI) an instance
#: that low could wait past the cadence, and the next kill waits for it
RESTART_LOW_FOR = 10.0
#: the seconds after a kill its restart's CPU is reported for (about a burst's length)
RESTART_WINDOW = 5.0
#: ``sh -c`` script: set this session's autogroup to niceness ``$1``, then exec the rest
_AUTOGROUP_NICE = 'echo "$1" > /proc/self/autogroup 2>/dev/null; shift; exec "$@"'


def warm_up(url: str, bucket: str, tag: str, timeout: float = 90.0) -> float:
    """Push one canary notification to a register-function instance and wait for its answer;
    returns the seconds it took.

    The function builds its service (registry pool, publisher, outbox drain) while it starts,
    before it listens (``functions/register/wiring.warm_up``); a build that failed there is
    made by the first request instead, and what the first delivery touches (the outbox drain,
    connections) is warmed by it. Without this, a kill's in-flight deliveries failed over to a
    survivor restarted after the previous kill and still cold waited seconds for that. A
    canary is what the reconcile service sends to prove notifications flow: it exercises that
    service and registers nothing (an audit row with no ``written_at``, which the canary checks
    never read)."""
    import base64

    import requests

    from obsingest import defaults
    from obsingest.store.base import StoredObject
    from obsingest.store.notifications import gcs_notification_message

    obj = StoredObject(
        bucket=bucket,
        name=f"{defaults.CANARY_PREFIX}soak-warm-up-{tag}",
        size=0,
        crc32c="AAAAAA==",
        md5_hash="1B2M2Y8AsgTpgAmY7PhCfg==",
        generation=time.time_ns() // 1000,
        time_created=datetime.now(UTC),
    )
    data, attributes = gcs_notification_message(obj)
    envelope: dict[str, Any] = {
        "message": {
            "data": base64.b64encode(data).decode(),
            "attributes": attributes,
            "messageId": f"soak-warm-up-{tag}-{obj.generation}",
        },
        "subscription": "soak-warm-up",
    }
    started = time.monotonic()
    response = requests.post(url, json=envelope, timeout=timeout)
    if response.status_code >= 300:
        raise AssertionError(f"warm-up of {url}: HTTP {response.status_code} {response.text}")
    return round(time.monotonic() - started, 3)


def _set_autogroup_nice(pid: int, nice: int) -> None:
    """The niceness of ``pid``'s session's autogroup (raising priority again needs root or
    CAP_SYS_NICE; without it the instance stays low, which its slower start shows)."""
    with contextlib.suppress(OSError):
        Path(f"/proc/{pid}/autogroup").write_text(str(nice))


@dataclass
class InstanceKill(Kill):
    """Kill (tests.chaos.faults) of either register-function instance: the whole process group
    SIGKILLed, started again ``duration`` seconds later.

    The restarted instance starts at a low CPU priority (``nice``) and is set back
    to the others' once it listens (or after ``RESTART_LOW_FOR`` s), then warmed up
    (``warm_up``, with ``warm``) before it counts as ready: deployed, a new instance
    starts on other hardware and takes no CPU from the surviving one, where here its seconds of
    start-up (imports, the registry's connections) would share the same 2 cores with the burst
    it should not slow down. The soak says so in its report (``restart_nice``).

    The priority is the session's autogroup's (``/proc/PID/autogroup``), not the process's
    niceness: every start is a session of its own (``start_new_session``), and with the
    kernel's autogroup scheduling (``kernel.sched_autogroup_enabled``, on here) CPU is shared
    between sessions first, a process's niceness only ranks it within its own session
    (benchmarks/notes/soak.md has the measurement)."""

    nice: int = RESTART_NICE
    #: ready once warm (``warm_up``), not once listening
    warm: bool = True

    def inject(self, world: World) -> None:
        import signal

        world.process(self.process).stop(signal.SIGKILL)

    def heal(self, world: World) -> None:
        proc = world.process(self.process)
        if not self.nice:
            proc.start(timeout=90)
            if self.warm:
                self.notes["warm_up_s"] = warm_up(proc.url, world.bucket, self.process)
            return
        normal = proc.argv
        # the lowered start goes through sh, which sets its new session's autogroup and execs
        proc.argv = lambda: ["sh", "-c", _AUTOGROUP_NICE, "sh", str(self.nice), *normal()]
        done = threading.Event()

        def set_back_later() -> None:
            if not done.wait(RESTART_LOW_FOR):
                popen = getattr(proc, "proc", None)
                if popen is not None:
                    _set_autogroup_nice(popen.pid, 0)

        threading.Thread(target=set_back_later, name="restart-priority", daemon=True).start()
        try:
            proc.start(timeout=90)
        finally:
            del proc.argv
            done.set()
        popen = getattr(proc, "proc", None)
        if popen is not None:
            _set_autogroup_nice(popen.pid, 0)
        # at the others' priority: once it listens the relay may send it a probe delivery,
        # which waits for this build
        if self.warm:
            self.notes["warm_up_s"] = warm_up(proc.url, world.bucket, self.process)


def _kill_loop(soak: Soak, run: Run, targets: list[int], rng: random.Random) -> None:
    """For each target exposure: when its first CCD file is in the hand-off directory, wait a
    random 0.2-1.0 s and SIGKILL one register-function instance (each in turn), started
    again ``restart_after`` s later on a thread of its own, so the next burst's kill is not held up by a slow
    restart. Never two at once: a kill waits until the others are back (the wait is
    recorded: on a loaded machine a restart can outlast the cadence)."""
    world = run.world
    deadline = time.monotonic() + soak.exposures * soak.interval + 120
    restarts: dict[str, threading.Thread] = {}
    names = instance_names(soak.instances)
    for i, seq in enumerate(targets):
        delay = rng.uniform(0.2, 1.0)
        while time.monotonic() < deadline:
            if any(any(d.glob("*.fits")) for d in obs_dir(world.handoff, seq)):
                break
            time.sleep(0.02)
        first_file = time.monotonic()
        time.sleep(delay)
        victim = names[i % len(names)]
        for thread in restarts.values():
            thread.join(timeout=300)
        waited = time.monotonic() - first_file - delay
        fault = InstanceKill(
            f"{victim} SIGKILL in exposure {seq}'s burst",
            duration=soak.restart_after,
            process=victim,
            nice=soak.restart_nice,
            warm=soak.warm,
        )
        fault.injected_at = time.time()
        fault.inject(world)
        run.note(
            f"SIGKILL {victim} inside exposure {seq} (+{delay:.2f} s"
            + (f", held {waited:.1f} s for the other instance" if waited > 0.05 else "")
            + ")"
        )
        entry = {
            "exposure": DAY_OBS * 100_000 + seq,
            "instance": victim,
            "after_first_file_s": round(delay + waited, 2),
            "at": fault.injected_at,
            "down_s": None,
        }
        soak.kill_log.append(entry)

        def heal(fault: InstanceKill = fault, entry: dict[str, Any] = entry) -> None:
            time.sleep(fault.duration)
            fault.heal(world)
            fault.healed_at = time.time()
            entry["down_s"] = round(fault.healed_at - fault.injected_at, 2)
            entry["warm_up_s"] = fault.notes.get("warm_up_s")
            run.note(f"{fault.process} back after {entry['down_s']} s")

        restarts[victim] = threading.Thread(target=heal, name=f"heal-{victim}", daemon=True)
        restarts[victim].start()
    for thread in restarts.values():
        thread.join(timeout=300)


def play(soak: Soak, workdir: Path, stack: PrivateStack | None = None) -> dict[str, Any]:
    """Deploy, play, kill, settle, count; the result as ``soak.json`` holds it."""
    rng = random.Random(soak.seed)
    night = Night(soak.exposures, DETECTORS, soak.interval)
    options = WorldOptions()
    scenario = Scenario(
        "soak",
        "N x 205 at a cadence, function SIGKILLs in bursts",
        lambda _r, _n: [],
        night,
        settle_timeout=300.0,
        options=options,
    )
    own = stack is None
    stack = stack or PrivateStack(["pubsub", "gcs", "postgres"]).up()
    world = SoakWorld("soak", stack, workdir, options)
    world.warm = soak.warm
    world.instances = soak.instances
    run = Run(scenario, soak.seed, False, world, night)
    sampler = None
    try:
        with stack.use():
            world.start()
            from producers.daq.simulator import INSTRUMENTS

            detectors = INSTRUMENTS[INSTRUMENT].detector_ids[:DETECTORS]
            run.sent = {
                f"{INSTRUMENT}/{DAY_OBS * 100_000 + s}/{d:03d}"
                for s in range(1, soak.exposures + 1)
                for d in detectors
            }
            targets = sorted(rng.sample(range(1, soak.exposures + 1), min(soak.kills, soak.exposures)))
            sampler = CpuSampler(world).start()
            run.started_wall = time.time()
            run.note(
                f"soak: {soak.exposures} x {DETECTORS} every {soak.interval:g} s, "
                f"SIGKILLs in exposures {targets}, seed {soak.seed}"
            )
            world.play(soak.exposures, DETECTORS, soak.interval)
            killer = threading.Thread(
                target=_kill_loop, args=(soak, run, targets, rng), name="kills", daemon=True
            )
            killer.start()
            assert world.daq is not None
            code = world.daq.wait(timeout=night.seconds + 300)
            run.check(code == 0, f"the DAQ night player exited {code}")
            run.night_over = time.monotonic()
            killer.join(timeout=300)
            run.healed = time.monotonic()
            _settle(run)
            cpu = sampler.stop()
            for kill in soak.kill_log:
                # the restart's CPU while the burst it was killed in still flows, and in all
                kill["restart_cpu_s_first_5s"] = sampler.spent(
                    kill["instance"], kill["at"], kill["at"] + RESTART_WINDOW
                )
                kill["restart_cpu_s"] = sampler.spent(
                    kill["instance"], kill["at"], kill["at"] + (kill["down_s"] or 0) + 1
                )
            sampler = None
            assert world.edge is not None
            run.edge_health = world.edge.health()
            run.edge_exit = world.edge.terminate()
            _verdict(run)
            return report(soak, run, cpu)
    finally:
        if sampler is not None:
            sampler.stop()
        world.close()
        if own:
            stack.down()


def _pct(values: list[float], q: float) -> float:
    return round(percentile(values, q * 100), 3) if values else 0.0


def _spread(values: list[float]) -> dict[str, float]:
    return {
        "p50": _pct(values, 0.5),
        "p95": _pct(values, 0.95),
        "max": round(max(values), 3) if values else 0.0,
    }


def report(soak: Soak, run: Run, cpu: dict[str, float]) -> dict[str, Any]:
    world = run.world
    assert world.observer is not None
    first: dict[str, float] = {}
    published: dict[str, float] = {}
    for a in world.observer.announcements():
        if a.readout is not None and a.key not in first:
            first[a.key] = (a.published - a.readout).total_seconds()
            published[a.key] = a.published.timestamp()
    after_kill = {
        str(k["exposure"]): sum(
            1 for key, t in published.items() if key.split("/")[1] == str(k["exposure"]) and t > k["at"]
        )
        for k in soak.kill_log
    }
    per_exposure: dict[int, list[float]] = {}
    for key, latency in first.items():
        per_exposure.setdefault(int(key.split("/")[1]), []).append(latency)
    last = {exp: max(v) for exp, v in sorted(per_exposure.items())}
    ccds = list(first.values())
    killed = {k["exposure"] for k in soak.kill_log}
    passes = _facility_passes(world)
    row = summary(run)
    ccd_count = max(1, row["sent"])
    result = {
        "seed": soak.seed,
        "exposures": soak.exposures,
        "detectors": DETECTORS,
        "interval_s": soak.interval,
        "ccds": row["sent"],
        "registered_once": row["registered_once"],
        "lost": row["lost"],
        "doubled": row["doubled"],
        "duplicate_announcements": row["duplicate_announcements"],
        "recovered": row["recovered"],
        "passed": row["passed"],
        "failures": row["failures"],
        "kills": soak.kill_log,
        #: a restarted instance's niceness until ready (InstanceKill): production's new instance
        #: starts on other hardware
        "restart_nice": soak.restart_nice if soak.kill_log else None,
        "restart_after_s": soak.restart_after if soak.kill_log else None,
        "warm": soak.warm,
        "instances": soak.instances,
        "warm_up_at_start_s": getattr(world, "warm_up_s", {}),
        "ccd_latency_s": _spread(ccds),
        "exposure_last_ccd_s": _spread(list(last.values())),
        "killed_exposures_last_ccd_s": {str(e): round(last.get(e, -1.0), 3) for e in killed},
        "announced_after_kill": after_kill,
        "ccds_over_5s": sum(v > BUDGET_CCD for v in ccds),
        "exposures_over_7s": sum(v > BUDGET_EXPOSURE for v in last.values()),
        "per_exposure_last_ccd_s": {str(e): round(v, 3) for e, v in last.items()},
        "cpu_s": cpu,
        "cpu_ms_per_ccd": {role: round(s / ccd_count * 1000, 2) for role, s in cpu.items()},
        "facility": {
            "passes": passes,
            "cpu_s_per_pass": round(cpu["facility"] / passes, 4) if passes else None,
            "objects_at_end": row["sent"],
            "projection": facility_projection(),
        },
        "events": run.events,
        "logs": str(world.logs),
        #: per CCD: readout -> announced, and when announced (epoch s): a killed burst's
        #: timeline (``--keep`` writes it beside the logs; soak.json leaves it out)
        "announced": {k: [round(first[k], 3), round(published[k], 3)] for k in sorted(first)},
    }
    result["budget_met"] = bool(
        result["passed"] and result["ccds_over_5s"] == 0 and result["exposures_over_7s"] == 0
    )
    return result


def _facility_passes(world: World) -> int:
    path = world.logs / "facility.log"
    if not path.exists():
        return 0
    return sum('"facility.pass"' in line for line in path.read_text().splitlines())


def facility_projection() -> dict[str, Any] | None:
    """``benchmarks/facility.py``'s incremental-pass CPU at its two sizes, a straight line
    through them, and its value at a night's 200,000 objects; the full-window sweep likewise
    (it grows with the bucket: it runs on its own, rarer schedule)."""
    if not FACILITY_RESULTS.exists():
        return None
    doc = json.loads(FACILITY_RESULTS.read_text())
    small, large = doc["sizes"][0], doc["sizes"][-1]

    def line(key: str) -> float:
        slope = (large[key] - small[key]) / (large["objects"] - small["objects"])
        return round(large[key] + slope * (NIGHT_OBJECTS - large["objects"]), 4)

    return {
        "measured_at": doc["when"],
        "load_1min": doc["machine"].get("load_1min"),
        "incremental_cpu_s": {
            str(small["objects"]): small["incremental_cpu_s_median"],
            str(large["objects"]): large["incremental_cpu_s_median"],
            str(NIGHT_OBJECTS): line("incremental_cpu_s_median"),
        },
        "full_sweep_cpu_s": {
            str(small["objects"]): small["full_cpu_s"],
            str(large["objects"]): large["full_cpu_s"],
            str(NIGHT_OBJECTS): line("full_cpu_s"),
        },
    }


def format_section(result: dict[str, Any], load: list[float]) -> str:
    """The README section of one soak run."""
    r = result
    proj = r["facility"]["projection"] or {}
    inc = proj.get("incremental_cpu_s", {})
    full = proj.get("full_sweep_cpu_s", {})
    kills = ", ".join(
        f"{k['exposure']} (+{k['after_first_file_s']} s, down {k['down_s']} s, restart CPU "
        f"{k.get('restart_cpu_s_first_5s')} s in the first 5 s)"
        for k in r["kills"]
    )
    lines = [
        f"`make soak`: {r['exposures']} exposures x {r['detectors']} LSSTCam CCDs (small "
        f"pixels) one every {r['interval_s']:g} s through edge -> GCS emulator -> Pub/Sub "
        f"emulator -> relay spread over {r.get('instances', 2)} register-function instances -> "
        "PostgreSQL, facility "
        f"service on; seed {r['seed']}; a register-function SIGKILL inside {len(r['kills'])} "
        f"exposure bursts: {kills} (+: seconds after the exposure's first file; over ~1 s, "
        "the kill waited for the other instances to be back from the previous one: a restart "
        f"that outlasted the cadence). Load average (1/5/15 min) at the end: {load}."
        + (
            f" A killed instance is started again with its session's autogroup at niceness "
            f"+{r['restart_nice']} until it is ready (at most {RESTART_LOW_FOR:g} s; then set "
            "back): deployed, a new instance starts on other hardware and takes no CPU from the "
            "burst, here it shares the 2 cores with it."
            if r.get("restart_nice")
            else ""
        )
        + (
            f" A killed instance is restarted {r['restart_after_s']:g} s after its kill (a "
            "supervisor's delay): after the burst has flowed, as on other hardware."
            if (r.get("restart_after_s") or RESTART_AFTER) > RESTART_AFTER
            else ""
        ),
        "",
        f"- lost {r['lost']}, doubled {r['doubled']}, registered once {r['registered_once']:,}"
        f"/{r['ccds']:,}, settled without a manual step: {r['recovered']}",
        f"- readout -> announced per CCD: p50 {r['ccd_latency_s']['p50']} s, p95 "
        f"{r['ccd_latency_s']['p95']} s, max {r['ccd_latency_s']['max']} s; "
        f"{r['ccds_over_5s']} CCDs over 5 s",
        f"- per exposure, its last CCD: p50 {r['exposure_last_ccd_s']['p50']} s, p95 "
        f"{r['exposure_last_ccd_s']['p95']} s, max {r['exposure_last_ccd_s']['max']} s; "
        f"{r['exposures_over_7s']} exposures over 7 s; the killed ones: "
        f"{r['killed_exposures_last_ccd_s']}",
        "- CPU ms per CCD by role: " + ", ".join(f"{k} {v}" for k, v in r["cpu_ms_per_ccd"].items()),
        f"- facility: {r['facility']['passes']} passes, {r['facility']['cpu_s_per_pass']} CPU s "
        f"per pass at up to {r['facility']['objects_at_end']:,} objects; "
        f"`benchmarks/facility.py` ({proj.get('measured_at', '?')}): incremental pass "
        + ", ".join(f"{v} s at {int(k):,}" for k, v in inc.items())
        + " objects (the last projected on a line through the two measured), full-window sweep "
        + ", ".join(f"{v} s at {int(k):,}" for k, v in full.items()),
        f"- budget (every CCD <= 5 s, every exposure's last CCD <= 7 s): "
        f"{'met' if r['budget_met'] else 'NOT met'}",
    ]
    return "\n".join(lines)


def write(results: list[dict[str, Any]], load: list[float]) -> None:
    """``results/soak.json``, ``soak.md`` and the ``## soak`` section of benchmarks/README.md."""
    doc = {
        "benchmark": "soak",
        "when": datetime.now().astimezone().isoformat(),
        "machine": {"cpus": os.cpu_count(), "load_avg": load},
        "runs": results,
    }
    RESULTS.write_text(json.dumps(doc, indent=2, default=str) + "\n")
    body = "\n\n".join(format_section(r, load) for r in results)
    if NOTE.exists():  # what moved the figures, kept in prose beside the code
        body += "\n\n" + re.sub(r"\A<!--.*?-->\n", "", NOTE.read_text(), flags=re.S).rstrip()
    # make bench rewrites the README and keeps this section from results/soak.md
    RESULTS.with_suffix(".md").write_text(body + "\n")
    readme = ROOT / "benchmarks" / "README.md"
    head, _, rest = readme.read_text().partition("\n## soak\n")
    after = rest.partition("\n## ")[2]  # the sections after it (the measurement history)
    tail = f"\n## {after.rstrip()}\n" if after else ""
    readme.write_text(f"{head.rstrip()}\n\n## soak\n\n{body}\n{tail}")
