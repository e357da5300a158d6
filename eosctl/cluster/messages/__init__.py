"""Kafka request and response schemas kafka-python 3.0.12 lacks, built from Apache Kafka's own JSON
message definitions (clients/src/main/resources/common/message/, copied unchanged at apache/kafka
1eb7644349cb07139d6a3c1ad1986979647cac99, Apache License 2.0 as their headers say) by kafka-python's
own JSON-schema machinery (ApiMessage with ``load_json`` naming this package).

ConsumerGroupDescribe (API key 69, KIP-848): the members and assignments of a group on the consumer
protocol, which DescribeGroups answers as Dead with no members.
"""

from __future__ import annotations

import sys

from kafka.protocol.api_message import ApiMessage

_HERE = sys.modules[__name__]


class ConsumerGroupDescribeRequest(ApiMessage, load_json=_HERE):
    pass


class ConsumerGroupDescribeResponse(ApiMessage, load_json=_HERE):
    pass
