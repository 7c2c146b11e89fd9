"""The whole-pipeline demo: where it runs (``environment``, ``embedded``, ``local_stack``), how
the edge sends (``transports``, ``kafka_transport``), the run itself (``run``) and the bad
inputs it can inject (``faults``)."""
