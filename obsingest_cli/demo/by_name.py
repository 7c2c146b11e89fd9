"""Pick the demo's environment and transport by name (``--stack``, ``--transport``)."""

from __future__ import annotations

from pathlib import Path

from obsingest_cli.demo.environment import DemoEnvironment, DemoTransport


def make_environment(
    stack: str, workdir: Path, keep: bool = True, registry_url: str | None = None
) -> DemoEnvironment:
    """``keep=False``: the local stack's per-run bucket and database are deleted on close
    (benchmark runs store gigabytes nobody looks at again). ``registry_url``: the embedded
    stack's registry (e.g. ``butler:<repo>``) instead of SQLite in the workdir."""
    if stack == "embedded":
        from obsingest_cli.demo.embedded import EmbeddedEnvironment

        return EmbeddedEnvironment(workdir, registry_url)
    from obsingest_cli.demo.local_stack import LocalStackEnvironment

    return LocalStackEnvironment(workdir, keep=keep)


class DirectTransport:
    """Transport (a): edge workers upload straight to the store; nothing runs at the facility.
    Transport (b), chunked Avro over Kafka, is ``kafka_transport``."""

    def __init__(self, env: DemoEnvironment) -> None:
        self.sender_url = env.store_url

    def start(self) -> None:
        pass

    def finish(self, timeout: float) -> None:
        pass  # uploads are synchronous: nothing in flight

    def processes(self) -> dict[str, list[int]]:
        return {}

    def close(self) -> None:
        pass


def make_transport(name: str, env: DemoEnvironment) -> DemoTransport:
    """``direct`` or ``kafka`` (argparse's choices)."""
    if name == "direct":
        return DirectTransport(env)
    from obsingest_cli.demo.kafka_transport import KafkaTransport

    return KafkaTransport(env)
