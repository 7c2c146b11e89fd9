"""Image names in one place, so a stand-in is found by the name of the image it replaces."""

from __future__ import annotations

import os

from infra.local.stack.settings import FAKE_GCS_SERVER_VERSION, KAFKA_VERSION

BASE_IMAGE = "obsingest/debian-base:bookworm"
OBSINGEST_VERSION = "0.1.0"

#: service -> the official image (or, for ``obsingest``, the project's own)
OFFICIAL: dict[str, str] = {
    "kafka": f"apache/kafka:{KAFKA_VERSION}",
    "gcs": f"fsouza/fake-gcs-server:{FAKE_GCS_SERVER_VERSION.lstrip('v')}",
    "pubsub": "gcr.io/google.com/cloudsdktool/google-cloud-cli:emulators",
    "postgres": "postgres:15",
    "obsingest": f"obsingest/obsingest:{OBSINGEST_VERSION}",
}

#: label every container we start carries, valued with the session that started it
SESSION_LABEL = "org.obsingest.session"
#: label valued with the run (``make test-containers``) whose sessions started the container:
#: what the run removes afterwards, other runs' containers left alone
RUN_LABEL = "org.obsingest.run"
RUN_ENV = "OBSINGEST_TC_RUN"
#: label of a locally built image: the digest of what it was built from
STAND_IN_LABEL = "org.obsingest.stand-in"


def labels(session: str) -> dict[str, str]:
    """The session's label, and the run's if infra/containers/test-containers.sh names one."""
    run = os.environ.get(RUN_ENV, "")
    return {SESSION_LABEL: session} | ({RUN_LABEL: run} if run else {})


def image(service: str) -> str:
    """``OBSINGEST_TC_<SERVICE>_IMAGE``, else the official tag."""
    return os.environ.get(f"OBSINGEST_TC_{service.upper()}_IMAGE") or OFFICIAL[service]
