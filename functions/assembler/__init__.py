"""The Kafka chunk assembler: CcdChunk records -> verified files in the object store. Nothing is
imported here, so ``--help`` stays instant."""
