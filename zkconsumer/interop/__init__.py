"""Running the original Kafka 0.8.2.2 consumer next to this project's, for differential tests (docs/interop.md)."""
