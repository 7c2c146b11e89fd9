"""Transport (a), direct upload: edge workers upload straight to the store (transport (b),
chunked Avro over Kafka, is ``kafka_transport``)."""

from __future__ import annotations

from obsingest_cli.demo.environment import DemoEnvironment


class DirectTransport:
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
