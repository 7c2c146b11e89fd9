"""Cloud Functions (functions-framework entry points) and the Kafka chunk assembler service."""
