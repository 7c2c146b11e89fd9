"""Go-built services (pstest-server, fake-gcs-server): a build killed midway is built again."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra.local.stack.errors import FetchError
from infra.local.stack.gcs_emulator import Gcs
from infra.local.stack.pubsub_emulator import PubSub
from infra.local.stack.settings import load_settings

pytestmark = pytest.mark.unit


def _fake_go(path: Path, name: str, then: str) -> None:
    """A ``go`` that writes executable ``name`` where ``go build -o`` or ``go install``
    (``GOBIN``) would, in place as go copies one out of its build cache, then runs ``then``."""
    path.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = build ]; then out="$3"; else mkdir -p "$GOBIN"; out="$GOBIN/{name}"; fi\n'
        'printf part > "$out"\n'
        f"{then}\n"
    )
    path.chmod(0o755)


@pytest.mark.parametrize("service", [PubSub, Gcs])
def test_a_build_killed_midway_is_built_again_at_the_next_fetch(tmp_path, service):
    """go writes the executable in place: killed midway, a part is left under the binary's name,
    and fetch(), which builds only when the binary is missing, took it for the whole one; the
    service then failed to start every time until someone deleted it."""
    go = tmp_path / "go"
    svc = service(load_settings(cache_dir=tmp_path / "cache", go=str(go)))
    _fake_go(go, svc.binary.name, "kill -9 $$")
    with pytest.raises(FetchError):
        svc.fetch()
    _fake_go(go, svc.binary.name, 'printf " and the rest" >> "$out"')
    svc.fetch()
    assert svc.binary.read_text() == "part and the rest"
