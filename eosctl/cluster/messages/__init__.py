"""Kafka request and response schemas kafka-python 3.0.12 lacks, read by kafka-python's own JSON-schema
machinery (ApiMessage with ``load_json`` naming this package).

ConsumerGroupDescribe (API key 69, KIP-848): the members and assignments of a group on the consumer
protocol, which DescribeGroups answers as Dead with no members; its JSON is Apache Kafka's own definition
(clients/src/main/resources/common/message/, copied unchanged at apache/kafka
1eb7644349cb07139d6a3c1ad1986979647cac99, Apache License 2.0 as their headers say).

StreamsGroupDescribe (89, KIP-1071: topology, members, tasks), ShareGroupDescribe (77, KIP-932: members,
assignments) and DescribeShareGroupOffsets (90, KIP-932: each share-partition's start offset and lag):
their definitions were printed by SchemaDump.java (here) from the compiled schemas of Apache Kafka 4.4.0's
kafka-clients jar, the release the suite runs, so they are exactly that release's wire format (the
source tree at hand predates these APIs); tests/integration/test_group_types.py prints them again from
the jar and compares.
"""

from __future__ import annotations

import sys

from kafka.protocol.api_message import ApiMessage

_HERE = sys.modules[__name__]
# ApiMessage takes `load_json` in its metaclass, which kafka-python's annotations don't declare: each class
# line below carries an ignore for that.


class ConsumerGroupDescribeRequest(ApiMessage, load_json=_HERE):  # type: ignore[call-arg]
    pass


class ConsumerGroupDescribeResponse(ApiMessage, load_json=_HERE):  # type: ignore[call-arg]
    pass


class StreamsGroupDescribeRequest(ApiMessage, load_json=_HERE):  # type: ignore[call-arg]
    pass


class StreamsGroupDescribeResponse(ApiMessage, load_json=_HERE):  # type: ignore[call-arg]
    pass


class ShareGroupDescribeRequest(ApiMessage, load_json=_HERE):  # type: ignore[call-arg]
    pass


class ShareGroupDescribeResponse(ApiMessage, load_json=_HERE):  # type: ignore[call-arg]
    pass


class DescribeShareGroupOffsetsRequest(ApiMessage, load_json=_HERE):  # type: ignore[call-arg]
    pass


class DescribeShareGroupOffsetsResponse(ApiMessage, load_json=_HERE):  # type: ignore[call-arg]
    pass
