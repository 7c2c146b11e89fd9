"""Image names in one place, so a stand-in is found by the name of the image it replaces.
Overridable per service with ``OBSINGEST_TC_{KAFKA,GCS,PUBSUB,POSTGRES,OBSINGEST}_IMAGE``.
"""

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
#: label valued with the run (``make test-containers``) whose sessions started the container,
#: from ``OBSINGEST_TC_RUN``: what the run removes afterwards, other runs' containers left alone
RUN_LABEL = "org.obsingest.run"
RUN_ENV = "OBSINGEST_TC_RUN"
#: label of a locally built image: the digest of what it was built from
STAND_IN_LABEL = "org.obsingest.stand-in"


def labels(session: str) -> dict[str, str]:
    """The labels of a container started by ``session``: the session's, and the run's if the
    environment names one (``OBSINGEST_TC_RUN``, set by infra/containers/test-containers.sh)."""
    out = {SESSION_LABEL: session}
    run = os.environ.get(RUN_ENV, "")
    if run:
        out[RUN_LABEL] = run
    return out


def image(service: str) -> str:
    """The image to run for ``service``: the environment's override, else the official tag."""
    return os.environ.get(f"OBSINGEST_TC_{service.upper()}_IMAGE") or OFFICIAL[service]
