"""The transfer harness: N CCDs per exposure through the edge service, the observatory transfer
report's table.

``plan`` (where, when, which ids), ``stats`` (tables and percentiles), ``records`` (an edge
outcome as a transfer record) and ``fitsheader`` (per-exposure header identity) are pure;
``ccdcache``, ``staging`` (the DAQ's files), ``harness`` (config, result, collection) and
``drive`` (one run) do processes and I/O. ``obsingest bench transfer`` is the command line;
end-to-end wiring lives there.
"""

from producers.transfer.drive import run_harness
from producers.transfer.harness import EndToEnd, HarnessConfig, HarnessResult

__all__ = ["EndToEnd", "HarnessConfig", "HarnessResult", "run_harness"]
