"""The register function's back office at the data facility: the safety nets that make "nothing
lost" hold when the world misbehaves, in one long-running service (``python -m
functions.register.facility``, ``obsingest reconcile --every``) and two one-shot commands
(``obsingest reconcile``, ``obsingest redrive``).

- ``redrive``: dead-lettered notifications go back to the objects topic by themselves, spaced
  exponentially and at most N times, then parked for a human with their whole history.
- ``reconcile``: the bucket against the registry; what a lost notification missed is registered
  through the same ``RegisterService`` (idempotent), registry rows whose object is gone are
  reported.
- ``canary``: an object written every N seconds must come back as an event; when it does not,
  notifications are broken: logged, counted, health non-zero, and repaired where a repair hook
  is wired (the local stack's provisioning).
- the arrivals outbox is drained (``functions.register.announce``).

It lives in the register unit because every one of these is about the register path: its
dead letters, its RegisterService, its outbox.
"""
