"""Message-bus adapters behind one small publishing interface (in-memory, Pub/Sub, Kafka)."""
