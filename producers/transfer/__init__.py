"""The transfer harness: N CCDs per exposure through the edge service, the observatory transfer
report's table. ``plan``, ``stats`` and ``fitsheader`` are pure; ``ccdcache``, ``staging``,
``harness`` and ``drive`` do processes and I/O; ``obsingest bench transfer`` is the command line
and holds the end-to-end wiring.
"""

from producers.transfer.drive import run_harness
from producers.transfer.harness import EndToEnd, HarnessConfig, HarnessResult

__all__ = ["EndToEnd", "HarnessConfig", "HarnessResult", "run_harness"]
