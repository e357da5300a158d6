"""eosctl: see, inspect and audit Kafka exactly-once pipelines."""

__version__ = "0.1.0"

from eosctl.base import lazykafka as _lazykafka  # noqa: E402  before any kafka-python import in the process

_lazykafka.install()
