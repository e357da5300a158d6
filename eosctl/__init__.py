"""eosctl: see, inspect and audit Kafka exactly-once pipelines."""

__version__ = "0.1.0"
