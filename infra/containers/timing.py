"""Seconds from nothing to a healthy stack on containers (engine, images, services), then the
containers removed and the engine stopped if this run started it:
``python -m infra.containers.timing``."""

from __future__ import annotations

import subprocess
import sys
import time

from infra.containers.images import HERE, Builder


def main() -> int:
    engine = HERE / "engine.sh"
    before = subprocess.run(["bash", str(engine), "status"], capture_output=True, text=True)
    started = time.monotonic()
    subprocess.run(["bash", str(engine), "up"], check=True)
    engine_s = time.monotonic() - started
    builder = Builder()
    marks = builder.ensure_all()
    images_s = time.monotonic() - started - engine_s
    from infra.containers.services import ContainerServices

    services = ContainerServices()
    try:
        services_started = time.monotonic()
        took = services.start_all()
        services_s = time.monotonic() - services_started
    finally:
        services.close()
        if before.stdout.strip() == "none":
            subprocess.run(["bash", str(engine), "down"], check=True)
    total = engine_s + images_s + services_s
    print(
        f"engine {engine_s:.1f} s; images {images_s:.1f} s ({marks}; {builder.timings}); "
        f"services {max(took.values()):.1f} s side by side "
        f"({', '.join(f'{k} {v:.1f}' for k, v in took.items())}); "
        f"nothing -> healthy {total:.1f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
