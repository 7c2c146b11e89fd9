"""The facility service as a process until SIGTERM or Ctrl-C; the exit code is its health. It
repairs nothing (production's topics belong to Terraform; ``obsingest reconcile --every`` repairs).
"""

from __future__ import annotations

import signal

from functions.register.facility.service import FacilityService
from functions.register.facility.wiring import facility_from_settings
from obsingest import logs


def serve(service: FacilityService) -> int:
    """Run ``service`` until SIGTERM/Ctrl-C, serving ``/metrics``; its health at the end."""
    from obsingest.metrics_http import serve_metrics

    signal.signal(signal.SIGTERM, lambda *_: service.stop())
    metrics_server = serve_metrics()
    try:
        return service.run_forever()
    except KeyboardInterrupt:
        service.stop()
        return service.health()
    finally:
        if metrics_server is not None:
            metrics_server.close()


def main() -> int:
    logs.configure()
    return serve(facility_from_settings())
