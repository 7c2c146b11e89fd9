"""The facility as containers: a Docker engine when there is none (``engine.sh``), images that
work offline (``images``: the official ones where they can be pulled, else stand-ins built from
Debian packages and the native stack's pinned artefacts), and the services and pipeline
components run as containers on host networking (``services``, ``facility``)."""
