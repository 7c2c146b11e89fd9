"""The presence API (``obsingest serve``): is a CCD registered, how complete and how late is an
exposure, what did a night bring; HTTP + JSON on the registry, read-only."""
