"""The transfer harness: N edge processes in step, the observatory transfer report's table.

``plan`` (where, when, which ids), ``stats`` (tables and percentiles) and ``fitsheader`` (per-
exposure header identity) are pure; ``ccdcache``, ``worker`` and ``harness`` run processes and
I/O. ``obsingest bench transfer`` is the command line; end-to-end wiring lives there.
"""

from producers.transfer.harness import EndToEnd, HarnessConfig, HarnessResult, run_harness

__all__ = ["EndToEnd", "HarnessConfig", "HarnessResult", "run_harness"]
