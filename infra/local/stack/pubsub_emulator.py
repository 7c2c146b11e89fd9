"""Pub/Sub emulator: Google's pstest fake served by infra/local/pstest-server (10 MB messages).
It never delivers push subscriptions: ``infra.local.relay`` does."""

from __future__ import annotations

import hashlib
from pathlib import Path

from infra.local.stack.base import Launch, Service
from infra.local.stack.errors import StackError
from infra.local.stack.golang import install
from infra.local.stack.process import port_open
from infra.local.stack.settings import PSTEST_VERSION


class PubSub(Service):
    name = "pubsub"
    port_fields = ("pubsub_port",)

    @property
    def source_dir(self) -> Path:
        return self.settings.infra_dir / "pstest-server"

    @property
    def binary(self) -> Path:
        """Named by a short hash of the server's sources: a change means a rebuild."""
        h = hashlib.sha256()
        for name in ("go.mod", "go.sum", "main.go"):
            path = self.source_dir / name
            h.update(name.encode())
            h.update(path.read_bytes() if path.exists() else b"")
        build = f"pstest-server-{PSTEST_VERSION}-{h.hexdigest()[:12]}"
        return self.settings.cache_dir / "bin" / build / "pstest-server"

    def env(self) -> dict[str, str]:
        project = self.settings.pubsub_project_id
        return {
            "PUBSUB_EMULATOR_HOST": self.endpoint,
            "PUBSUB_PROJECT_ID": project,
            "GOOGLE_CLOUD_PROJECT": project,
        }

    def fetch(self) -> None:
        """Build the in-repo pstest server into the cache (rebuilt only when sources change)."""
        if self.binary.exists():
            return
        install(self.settings, self.name, ".", self.binary, cwd=self.source_dir)

    def launch(self) -> Launch:
        s = self.settings
        return Launch(argv=[str(self.binary), "-host", s.host, "-port", str(s.pubsub_port)], env={})

    def probe(self) -> None:
        """A ListTopics call over gRPC, as the Pub/Sub client makes."""
        import grpc
        from google.pubsub_v1.services.publisher import PublisherClient
        from google.pubsub_v1.services.publisher.transports import PublisherGrpcTransport

        if not port_open(self.settings.host, self.settings.pubsub_port):
            raise StackError(self.name, f"nothing listens on {self.endpoint}")
        project = f"projects/{self.settings.pubsub_project_id}"
        with grpc.insecure_channel(self.endpoint) as channel:
            client = PublisherClient(transport=PublisherGrpcTransport(channel=channel))
            list(client.list_topics(request={"project": project}, timeout=2))
