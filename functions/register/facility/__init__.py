"""The register function's back office, the safety nets that keep "nothing lost" true: redrive,
reconcile, canary and the outbox drain (functions/register/README.md, "Nothing lost")."""
