"""``obsingest relay``'s work: settings from options, run the relay, print its counts."""

from __future__ import annotations

import json
from typing import Any


def run_relay(overrides: dict[str, Any], until_idle: float) -> int:
    from infra.local.relay.main import run
    from infra.local.relay.settings import RelaySettings

    settings = RelaySettings(**{k: v for k, v in overrides.items() if v is not None})
    stats = run(settings, until_idle)
    print(json.dumps(stats.__dict__))
    return 0
