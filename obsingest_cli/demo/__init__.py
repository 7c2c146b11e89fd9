"""The whole-pipeline demo (``run``), its environments and transports (also the benchmarks')."""
