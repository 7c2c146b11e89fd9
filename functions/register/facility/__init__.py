"""The register function's back office: safety nets that keep "nothing lost" true, in one
long-running service (``python -m functions.register.facility``, ``obsingest reconcile --every``)
and two one-shot commands (``obsingest reconcile``, ``obsingest redrive``): ``redrive`` (dead
letters back, then parked), ``reconcile`` (what lost notifications missed), ``canary`` (proof
notifications flow) and the outbox drain. All are about the register path, hence live here.
"""
