"""How the demo's edge workers move CCDs: (a) direct upload, (b) chunked Avro over Kafka.

A transport names the ``sender_url`` edge workers send to (see ``producers.edge``) and runs
whatever must run at the data facility for it (the Kafka assembler) while the demo runs.
"""

from __future__ import annotations

from typing import Protocol

from obsingest.cli.demo_envs import DemoEnvironment


class DemoTransport(Protocol):
    sender_url: str

    def start(self) -> None: ...

    def finish(self, timeout: float) -> None:
        """Wait until everything sent has reached the store."""

    def processes(self) -> dict[str, list[int]]:
        """Facility services it runs as processes of their own (role -> pids)."""

    def close(self) -> None: ...


class DirectTransport:
    """Edge workers upload straight to the store; nothing runs at the facility side."""

    def __init__(self, env: DemoEnvironment) -> None:
        self.sender_url = env.store_url

    def start(self) -> None:
        """Nothing to start."""

    def finish(self, timeout: float) -> None:
        """Uploads are synchronous: nothing in flight."""

    def processes(self) -> dict[str, list[int]]:
        return {}

    def close(self) -> None:
        """Nothing to stop."""


def make_transport(name: str, env: DemoEnvironment) -> DemoTransport:
    if name == "direct":
        return DirectTransport(env)
    if name == "kafka":
        from obsingest.cli.demo_transport_kafka import KafkaTransport

        return KafkaTransport(env)
    raise ValueError(f"unknown --transport {name!r} (direct, kafka)")
