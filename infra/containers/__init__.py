"""The facility as containers: an engine (``engine.sh``), images that work offline
(``images``), and the services and pipeline components on host networking (``services``,
``facility``)."""
