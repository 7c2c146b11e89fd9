"""What every benchmark result records about the run: when, and how busy the machine was."""

from __future__ import annotations

import os
import platform
from datetime import UTC, datetime
from typing import Any


def run_header(name: str) -> dict[str, Any]:
    """``benchmark``, ``when`` and ``machine`` fields of a result (load matters on 2 cores)."""
    return {
        "benchmark": name,
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_1min": round(os.getloadavg()[0], 2),
        },
    }
