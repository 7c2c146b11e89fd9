"""The Kafka chunk assembler: CcdChunk records -> verified files in the object store.

``reassembly`` is the pure state machine (testable without Kafka); ``service`` is the consumer
group member that drives it, with its Kafka client configuration (``kafka_clients``), dead-letter
policy (``dlq``) and re-read of files dropped for memory (``recovery``) in modules of their own;
``main`` is the process entry point (``python -m functions.assembler``, ``obsingest assembler``).

Nothing is imported here: ``main`` must load without Kafka or Avro so ``--help`` stays instant.
"""
