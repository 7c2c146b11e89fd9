"""The scenarios: what breaks, when (seeded random moments), on how big a night, and what must
hold besides "nothing lost, nothing doubled". ``reduced`` is the night a scenario plays inside
``make test`` (None: only in ``make chaos``); the faults are the same.

Facility settings: a pass every 10 s and a canary judged after 30 s unless a scenario says
otherwise; the emulator restarts run the reconcile at its defaults (a pass every 30 s, 15 s
grace: what the "registered within 2 minutes" promise rests on).

The Butler lane (``*-butler``): the facility scenarios again with a ``butler:`` registry, a
repository made by the real ``butler create`` on the world's PostgreSQL (SIGKILL of the function
mid-ingest, PostgreSQL crashes, a Pub/Sub emulator restart, a redelivery storm), counted from the
Butler itself (daf_butler's API while settling, ``butler query-datasets`` at the end).
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable

from tests.chaos import bad_input, checks, exhaustion
from tests.chaos.exhaustion import BrokerDiskFull, ConnectionHog, RegistryDiskFull, StoreDiskFull, StoreStorm
from tests.chaos.faults import (
    BrokerKill,
    EmulatorRestart,
    Fault,
    Kill,
    LinkFault,
    Nested,
    NotificationsLost,
    Outage,
    PostgresCrash,
    RedeliveryStorm,
    ServiceDown,
    SpoolFull,
    TopicOutage,
)
from tests.chaos.runner import Night, Plan, Scenario, spread
from tests.chaos.world import WorldOptions

FAST_FACILITY = {"RECONCILE_CANARY_EVERY": "10", "RECONCILE_CANARY_TIMEOUT": "30"}
#: a relay that gives up after 5 pushes in ~15 s, so a minute's outage does dead-letter
IMPATIENT_RELAY = {"max_attempts": "5", "min_backoff": "1", "max_backoff": "60"}


def _kills(process: str, n: int, restart: tuple[float, float], vanish: bool = False) -> Plan:
    def plan(rng: random.Random, night: Night) -> list[tuple[float, Fault]]:
        times = spread(rng, n, 2.0, max(3.0, night.seconds * 0.8), gap=restart[1] + 2.0)
        faults: list[tuple[float, Fault]] = []
        for i, at in enumerate(times):
            kill = Kill(f"SIGKILL {process}", rng.uniform(*restart), process=process)
            if vanish and i == 0:
                kill.vanished = bad_input.edge_file("vanished", 40)
            faults.append((at, kill))
        return faults

    return plan


def _one(make: Callable[[], Fault], lo: float, hi: float) -> Plan:
    def plan(rng: random.Random, night: Night) -> list[tuple[float, Fault]]:
        return [(rng.uniform(lo, hi), make())]

    return plan


def _sequence(*steps: tuple[Callable[[], Fault], float, float]) -> Plan:
    """Faults one after the other, each at a random moment of its window after the previous
    one healed."""

    def plan(rng: random.Random, night: Night) -> list[tuple[float, Fault]]:
        out: list[tuple[float, Fault]] = []
        at = 0.0
        for make, lo, hi in steps:
            fault = make()
            at += rng.uniform(lo, hi)
            out.append((at, fault))
            at += fault.duration
        return out

    return plan


def _kill_everything(rng: random.Random, night: Night) -> list[tuple[float, Fault]]:
    """Six SIGKILLs of the pipeline's long-running processes, each one at least once, in a
    random order at random moments (restarted 0.5-3 s later)."""
    victims = ["edge", "relay", "function", "facility"]
    victims += [rng.choice(victims) for _ in range(2)]
    rng.shuffle(victims)
    times = spread(rng, len(victims), 2.0, max(3.0, night.seconds * 0.9), gap=4.0)
    return [
        (at, Kill(f"SIGKILL {name}", rng.uniform(0.5, 3.0), process=name))
        for at, name in zip(times, victims, strict=True)
    ]


def _pg_crashes(rng: random.Random, night: Night) -> list[tuple[float, Fault]]:
    times = spread(rng, 2, 3.0, max(4.0, night.seconds * 0.8), gap=4.0)
    return [(at, PostgresCrash("PostgreSQL crash")) for at in times]


def _kafka_plan(rng: random.Random, night: Night) -> list[tuple[float, Fault]]:
    steps = [
        Kill("SIGKILL assembler", rng.uniform(1, 3), process="assembler"),
        Kill("SIGKILL edge", rng.uniform(1, 3), process="edge", vanished=bad_input.edge_file("vanished", 40)),
        BrokerKill("SIGKILL Kafka broker", rng.uniform(3, 6)),
        Kill("SIGKILL assembler", rng.uniform(1, 3), process="assembler"),
    ]
    times = spread(rng, len(steps), 3.0, max(4.0, night.seconds * 0.8), gap=8.0)
    return list(zip(times, steps, strict=True))


def _emulator_restart(service: str, label: str, forgotten: str) -> Scenario:
    """An emulator restarted mid-night: what it kept in memory is gone until repaired."""
    return Scenario(
        f"{service}-restart",
        f"{label} emulator restarted ({forgotten})",
        _one(lambda: EmulatorRestart(f"{label} emulator restart", service=service), 8.0, 14.0),
        Night(10, 6, 5.0),
        reduced=Night(8, 6, 5.0),
        options=WorldOptions(facility={"RECONCILE_CANARY_TIMEOUT": "30"}, facility_every=30.0),
        checks=(checks.emulator_restart_repaired_within_2_minutes,),
        settle_timeout=240.0,
    )


SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "edge-sigkill",
        "edge SIGKILLed 3 times mid-night (a CCD journalled, then its file deleted, while down); "
        "manifests published: one ExposureIngested per exposure",
        _kills("edge", 3, (0.5, 3.0), vanish=True),
        Night(30, 10, 0.5),
        reduced=Night(30, 10, 0.5),
        bad=(2, 4),
        options=WorldOptions(manifests=True),
        checks=(checks.edge_resumed_after_kills, checks.one_exposure_ingested_per_exposure),
        exactly_once_announcements=True,
    ),
    Scenario(
        "store-link-down",
        "edge <-> GCS link down 30 s (toxiproxy: connections refused)",
        _one(lambda: LinkFault("edge<->store down 30 s", 30.0, link="store", kind="down"), 5.0, 8.0),
        Night(16, 4, 2.0),
        reduced=Night(16, 4, 2.0),
        options=WorldOptions(store_link=True),
        checks=(checks.edge_rode_out_the_store_outage,),
        exactly_once_announcements=True,
    ),
    Scenario(
        "store-link-resets",
        "edge <-> GCS: connections reset for 15 s, then a 20 s blackhole (toxiproxy)",
        _sequence(
            (lambda: LinkFault("edge<->store resets 15 s", 15.0, link="store", kind="reset"), 3.0, 6.0),
            (
                lambda: LinkFault("edge<->store blackhole 20 s", 20.0, link="store", kind="blackhole"),
                3.0,
                6.0,
            ),
        ),
        Night(12, 6, 4.0),
        options=WorldOptions(store_link=True),
        checks=(checks.edge_retried_through_link_faults,),
        exactly_once_announcements=True,
    ),
    Scenario(
        "spool-full",
        "the edge's spool filesystem full for 15 s",
        _one(lambda: SpoolFull("spool full 15 s", 15.0), 5.0, 8.0),
        Night(12, 5, 1.5),
        reduced=Night(12, 5, 1.5),
        options=WorldOptions(spool_mb=16, edge_args=("--min-free-mb", "1")),
        checks=(checks.spool_full_refused_loudly,),
        exactly_once_announcements=True,
    ),
    Scenario(
        "spool-full-edge-killed",
        "the spool full for 25 s, and the edge SIGKILLed and restarted while it is full",
        _one(
            lambda: Nested(
                "spool full 25 s, edge SIGKILLed 8 s in",
                25.0,
                outer=SpoolFull("spool full 25 s", 25.0),
                inner=Kill("SIGKILL edge", 2.0, process="edge"),
                offset=8.0,
            ),
            5.0,
            8.0,
        ),
        Night(16, 5, 1.5),
        options=WorldOptions(spool_mb=16, edge_args=("--min-free-mb", "1")),
        exactly_once_announcements=True,
    ),
    Scenario(
        "kafka-broker-down-90s",
        "edge -> Kafka -> assembler: the broker SIGKILLed and kept down 90 s (longer than the "
        "producer's 60 s delivery timeout)",
        _one(lambda: BrokerKill("Kafka broker down 90 s", 90.0), 5.0, 10.0),
        Night(12, 5, 3.0),
        options=WorldOptions(transport="kafka"),
        exactly_once_announcements=True,
        kafka=True,
        settle_timeout=300.0,
    ),
    Scenario(
        "relay-sigkill",
        "relay SIGKILLed 3 times (pushes in flight lost, redelivered)",
        _kills("relay", 3, (1.0, 4.0)),
        Night(12, 8, 1.5),
    ),
    Scenario(
        "function-sigkill",
        "register function SIGKILLed 3 times (mid-request)",
        _kills("function", 3, (0.5, 2.0)),
        Night(12, 8, 1.5),
    ),
    Scenario(
        "sigkill-all",
        "edge, relay, function and facility service SIGKILLed, 6 times in all, at random",
        _kill_everything,
        Night(20, 8, 1.5),
        options=WorldOptions(facility=FAST_FACILITY),
    ),
    Scenario(
        "gcs-down-30s",
        "GCS emulator down 30 s (edge, function, reconcile and canary all lose the store; "
        "notification configs forgotten)",
        _one(lambda: ServiceDown("GCS emulator down 30 s", 30.0, service="gcs"), 5.0, 10.0),
        Night(12, 6, 4.0),
        options=WorldOptions(facility=FAST_FACILITY),
        checks=(checks.reconcile_registered_what_notifications_missed,),
        settle_timeout=300.0,
    ),
    Scenario(
        "notifications-lost",
        "bucket notification configs deleted; the facility service SIGKILLed twice meanwhile",
        _sequence(
            (lambda: NotificationsLost("notification configs deleted"), 3.0, 6.0),
            (lambda: Kill("SIGKILL facility", 2.0, process="facility"), 5.0, 10.0),
            (lambda: Kill("SIGKILL facility", 2.0, process="facility"), 10.0, 20.0),
        ),
        Night(12, 8, 3.0),
        options=WorldOptions(facility=FAST_FACILITY),
        checks=(checks.reconcile_repaired_lost_notifications,),
    ),
    Scenario(
        "function-outage-60s",
        "register function down 60 s; the relay gives up after 5 pushes (~15 s): redrive",
        _one(lambda: Outage("function down 60 s", 60.0, process="function"), 3.0, 6.0),
        Night(12, 6, 6.0),
        reduced=Night(6, 6, 6.0),
        options=WorldOptions(relay=IMPATIENT_RELAY, facility={**FAST_FACILITY, "RECONCILE_GRACE": "3600"}),
        checks=(checks.redrive_brought_back_the_dead_letters,),
        settle_timeout=360.0,
    ),
    Scenario(
        "registry-outage-60s",
        "PostgreSQL stopped for 60 s (the registry unreachable)",
        _one(lambda: ServiceDown("PostgreSQL down 60 s", 60.0, service="postgres"), 5.0, 10.0),
        Night(12, 6, 6.0),
        options=WorldOptions(facility=FAST_FACILITY),
        checks=(checks.relay_rode_out_the_registry_outage,),
        settle_timeout=300.0,
    ),
    Scenario(
        "arrivals-topic-outage-60s",
        "ccd-arrivals topic deleted for 60 s",
        _one(lambda: TopicOutage("arrivals topic gone 60 s", 60.0), 5.0, 10.0),
        Night(12, 6, 6.0),
        reduced=Night(8, 6, 6.0),
        options=WorldOptions(facility=FAST_FACILITY),
        checks=(checks.outbox_announced_after_the_topic_came_back,),
        exactly_once_announcements=True,
    ),
    Scenario(
        "postgres-crash",
        "PostgreSQL crashed twice (pg_ctl restart -m immediate) under load",
        _pg_crashes,
        Night(20, 10, 0.75),
        reduced=Night(20, 10, 0.75),
        options=WorldOptions(facility={**FAST_FACILITY, "RECONCILE_GRACE": "60"}),
        checks=(checks.postgres_crash_lost_nothing_acked,),
    ),
    _emulator_restart("gcs", "GCS", "notification configs forgotten"),
    _emulator_restart("pubsub", "Pub/Sub", "every topic and subscription forgotten"),
    Scenario(
        "registry-link",
        "function <-> PostgreSQL: connections reset for 10 s, then a 20 s blackhole (toxiproxy)",
        _sequence(
            (
                lambda: LinkFault("function<->registry resets 10 s", 10.0, link="registry", kind="reset"),
                3.0,
                6.0,
            ),
            (
                lambda: LinkFault(
                    "function<->registry blackhole 20 s", 20.0, link="registry", kind="blackhole"
                ),
                3.0,
                6.0,
            ),
        ),
        Night(12, 6, 4.0),
        options=WorldOptions(registry_link=True, facility=FAST_FACILITY),
        checks=(checks.relay_retried,),
        settle_timeout=300.0,
    ),
    Scenario(
        "kafka",
        "edge -> Kafka -> assembler: assembler SIGKILLed twice, edge once, the broker once",
        _kafka_plan,
        Night(10, 6, 2.0),
        reduced=Night(10, 6, 2.0),
        options=WorldOptions(transport="kafka"),
        checks=(checks.kafka_every_ccd_acked_by_the_broker,),
        exactly_once_announcements=True,
        kafka=True,
    ),
    Scenario(
        "gcs-rate-limit-storm",
        "the store answers the edge 429 / 503 / quota 403 for 20 s (an HTTP fault proxy)",
        _one(lambda: StoreStorm("GCS 429/503/403 storm 20 s", 20.0), 4.0, 7.0),
        Night(12, 5, 2.0),
        reduced=Night(8, 5, 2.0),
        options=WorldOptions(store_fault=True),
        checks=(exhaustion.edge_rode_out_the_rate_limit,),
        exactly_once_announcements=True,
    ),
    Scenario(
        "gcs-disk-full",
        "the store's own disk (the GCS emulator's directory of the bucket, a 64 MB tmpfs) full "
        "for 30 s: it answers 500 no space left on device",
        _one(lambda: StoreDiskFull("store disk full 30 s", 30.0), 4.0, 7.0),
        Night(12, 5, 2.0),
        options=WorldOptions(gcs_disk_mb=64),
        checks=(exhaustion.edge_rode_out_the_full_store,),
        exactly_once_announcements=True,
    ),
    Scenario(
        "postgres-out-of-connections",
        "every PostgreSQL connection slot taken for 30 s, the register function restarted "
        "meanwhile (it must connect while none is left)",
        _one(lambda: ConnectionHog("PostgreSQL out of connection slots 30 s", 30.0), 4.0, 7.0),
        Night(12, 5, 3.0),
        options=WorldOptions(facility=FAST_FACILITY),
        checks=(exhaustion.registry_rode_out_the_connection_slots,),
        settle_timeout=300.0,
    ),
    Scenario(
        "postgres-disk-full",
        "the registry database's disk (its tablespace on a 64 MB tmpfs) full for 30 s",
        _one(lambda: RegistryDiskFull("registry disk full 30 s", 30.0), 4.0, 7.0),
        Night(12, 5, 3.0),
        options=WorldOptions(registry_disk_mb=64, facility=FAST_FACILITY),
        checks=(exhaustion.registry_rode_out_its_full_disk,),
        settle_timeout=300.0,
    ),
    Scenario(
        "kafka-broker-disk-full",
        "edge -> Kafka -> assembler: the broker's log directory (a 64 MB tmpfs of its own) full "
        "for 30 s: No space left on device, the directory offline, the broker halts; space "
        "freed and the broker restarted as its supervisor would",
        _one(lambda: BrokerDiskFull("Kafka broker disk full 30 s", 30.0), 4.0, 7.0),
        Night(12, 5, 2.0),
        options=WorldOptions(transport="kafka", kafka_disk_mb=64),
        checks=(exhaustion.broker_rode_out_its_full_disk,),
        exactly_once_announcements=True,
        settle_timeout=300.0,
    ),
    Scenario(
        "bad-input",
        "bad input only: every kind of malformed notification and bad file, twice",
        lambda rng, night: [],
        Night(6, 6, 2.0),
        bad=(2 * len(bad_input.NOTIFICATION_KINDS), 2 * len(bad_input.FILE_KINDS)),
        exactly_once_announcements=True,
    ),
)


def _on_butler(base: str, reduced: Night | None = None, **changes: object) -> Scenario:
    """The scenario named ``base`` on a Butler registry (module doc), ``<base>-butler``."""
    scenario = next(s for s in SCENARIOS if s.name == base)
    return dataclasses.replace(
        scenario,
        name=f"{base}-butler",
        what=f"{scenario.what}; a Butler registry (butler create, PostgreSQL)",
        reduced=reduced,
        options=dataclasses.replace(scenario.options, butler=True),
        checks=(*scenario.checks, checks.butler_cli_lists_each_ccd_once),
        **changes,  # type: ignore[arg-type]
    )


SCENARIOS += (
    _on_butler("function-sigkill", reduced=Night(6, 8, 1.5)),
    _on_butler("postgres-crash"),
    _on_butler("pubsub-restart"),
    Scenario(
        "redelivery-storm-butler",
        "every stored CCD notified 2 times more every 3 s for 15 s (a redelivery storm); a "
        "Butler registry (butler create, PostgreSQL)",
        _one(lambda: RedeliveryStorm("redelivery storm 15 s", 15.0, copies=2, every=3.0), 3.0, 5.0),
        Night(12, 6, 1.5),
        reduced=Night(6, 6, 1.5),
        options=WorldOptions(butler=True),
        checks=(checks.storm_redelivered, checks.butler_cli_lists_each_ccd_once),
    ),
)


def by_name(names: list[str] | None) -> list[Scenario]:
    if not names:
        return list(SCENARIOS)
    known = {s.name: s for s in SCENARIOS}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"unknown scenario(s) {unknown}; known: {sorted(known)}")
    return [known[n] for n in names]


def reduced() -> list[Scenario]:
    return [s for s in SCENARIOS if s.reduced is not None]
