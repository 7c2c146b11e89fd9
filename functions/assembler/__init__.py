"""The Kafka chunk assembler: CcdChunk records -> verified files in the object store. ``reassembly``
is the pure state machine; ``service`` drives it (with ``kafka_clients``, ``dlq``, ``recovery``);
``main`` is the entry point. Nothing is imported here, so ``--help`` stays instant."""
