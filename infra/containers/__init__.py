"""The facility as containers: engine (``engine.sh``), images, services and pipeline components."""
