"""Google Cloud Storage emulator: fake-gcs-server, publishing bucket notifications to our
pstest server (PUBSUB_EMULATOR_HOST), only to topics that already exist.
"""

from __future__ import annotations

from pathlib import Path

import requests

from infra.local.stack.base import Launch, Service
from infra.local.stack.golang import run_go
from infra.local.stack.settings import FAKE_GCS_SERVER_MODULE, FAKE_GCS_SERVER_VERSION


class Gcs(Service):
    name = "gcs"

    @property
    def binary(self) -> Path:
        build = f"fake-gcs-server-{FAKE_GCS_SERVER_VERSION}"
        return self.settings.cache_dir / "bin" / build / "fake-gcs-server"

    @property
    def url(self) -> str:
        return f"http://{self.settings.host}:{self.settings.gcs_port}"

    @property
    def endpoint(self) -> str:
        return self.url

    def ports(self) -> list[int]:
        return [self.settings.gcs_port]

    def env(self) -> dict[str, str]:
        return {"STORAGE_EMULATOR_HOST": self.url}

    def fetch(self) -> None:
        """``go install`` the pinned fake-gcs-server into the cache, once."""
        if self.binary.exists():
            return
        module = f"{FAKE_GCS_SERVER_MODULE}@{FAKE_GCS_SERVER_VERSION}"
        run_go(self.settings, self.name, ["install", module], gobin=self.binary.parent)

    def launch(self) -> Launch:
        s = self.settings
        root = s.data_dir(self.name) / "storage"
        root.mkdir(parents=True, exist_ok=True)
        argv = [str(self.binary), "-scheme", "http", "-host", s.host, "-port", str(s.gcs_port)]
        argv += ["-external-url", self.url, "-public-host", f"{s.host}:{s.gcs_port}"]
        argv += ["-backend", s.gcs_backend, "-filesystem-root", str(root), "-log-level", "info"]
        env = {
            "PUBSUB_EMULATOR_HOST": f"{s.host}:{s.pubsub_port}",
            "GOOGLE_CLOUD_PROJECT": s.pubsub_project_id,
        }
        return Launch(argv=argv, env=env)

    def probe(self) -> None:
        """A bucket list over the JSON API, as the storage client does."""
        resp = requests.get(f"{self.url}/storage/v1/b", params={"project": "probe"}, timeout=2)
        resp.raise_for_status()
