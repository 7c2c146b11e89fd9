"""Google Cloud Storage emulator: fake-gcs-server, publishing bucket notifications to our
pstest server (PUBSUB_EMULATOR_HOST), only to topics that already exist.
"""

from __future__ import annotations

from pathlib import Path

import requests

from infra.local.stack.base import Launch, Service
from infra.local.stack.golang import install
from infra.local.stack.settings import FAKE_GCS_SERVER_MODULE, FAKE_GCS_SERVER_VERSION


class Gcs(Service):
    name = "gcs"
    port_fields = ("gcs_port",)

    @property
    def binary(self) -> Path:
        build = f"fake-gcs-server-{FAKE_GCS_SERVER_VERSION}"
        return self.settings.cache_dir / "bin" / build / "fake-gcs-server"

    @property
    def endpoint(self) -> str:
        return f"http://{self.settings.host}:{self.settings.gcs_port}"

    def env(self) -> dict[str, str]:
        return {"STORAGE_EMULATOR_HOST": self.endpoint}

    def fetch(self) -> None:
        """``go install`` the pinned fake-gcs-server into the cache, once."""
        if self.binary.exists():
            return
        module = f"{FAKE_GCS_SERVER_MODULE}@{FAKE_GCS_SERVER_VERSION}"
        install(self.settings, self.name, module, self.binary)

    def server(self, backend: str) -> Launch:
        """The server's flags (no program) and environment, shared with the container backend."""
        s = self.settings
        argv = ["-scheme", "http", "-host", s.host, "-port", str(s.gcs_port), "-external-url", self.endpoint]
        # warn: at info it logs every request, into a log kept for good (hundreds of MB a night)
        argv += ["-public-host", f"{s.host}:{s.gcs_port}", "-backend", backend, "-log-level", "warn"]
        env = {
            "PUBSUB_EMULATOR_HOST": f"{s.host}:{s.pubsub_port}",
            "GOOGLE_CLOUD_PROJECT": s.pubsub_project_id,
        }
        return Launch(argv=argv, env=env)

    def launch(self) -> Launch:
        root = self.settings.data_dir(self.name) / "storage"
        root.mkdir(parents=True, exist_ok=True)
        server = self.server(self.settings.gcs_backend)
        return Launch([str(self.binary), *server.argv, "-filesystem-root", str(root)], server.env)

    def probe(self) -> None:
        """A bucket list over the JSON API, as the storage client does."""
        resp = requests.get(f"{self.endpoint}/storage/v1/b", params={"project": "probe"}, timeout=2)
        resp.raise_for_status()
