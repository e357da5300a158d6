"""Where a consumer group stands: its committed offsets and its state, as Kafka's coordinators say.

The one place that asks; `eosctl lag`, `eosctl ledger`, the snapshot and the audit all read committed
offsets through here. confluent-kafka's AdminClient, because it keeps requests for every group in flight
together (one group per request is all the API takes).
"""

from __future__ import annotations

from collections.abc import Sequence

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException
from confluent_kafka.admin import AdminClient

from eosctl.clients import confluent_admin
from eosctl.config import Cluster
from eosctl.errors import BrokerError
from eosctl.model import TP


def group_offsets(admin: AdminClient, groups: Sequence[str],
                  timeout: float = 5.0) -> dict[str, dict[TP, int]]:
    """Committed offsets of each group (confluent-kafka supports one group per request: all in flight)."""
    futures = {g: admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(g)],
                                                    request_timeout=timeout)[g] for g in groups}
    out: dict[str, dict[TP, int]] = {}
    for g, f in futures.items():
        try:
            result = f.result(timeout=timeout + 1)
        except KafkaException as e:
            raise BrokerError(f"cannot read committed offsets of group {g!r}: {e.args[0].str()}") from None
        except TimeoutError:
            raise BrokerError(f"no answer for the committed offsets of group {g!r} "
                              f"within {timeout:.0f}s") from None
        out[g] = {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions if tp.offset >= 0}
    return out


def group_states(admin: AdminClient, timeout: float = 5.0) -> dict[str, str]:
    try:
        result = admin.list_consumer_groups(request_timeout=timeout).result(timeout=timeout + 1)
    except (KafkaException, TimeoutError) as e:
        raise BrokerError(f"cannot list consumer groups: {e}") from None
    return {g.group_id: g.state.name for g in result.valid}


def committed_offsets(cluster: Cluster, group: str, timeout: float = 10.0) -> dict[TP, int]:
    """One group's committed offsets ((topic, partition) -> next offset to read); {} if it has none."""
    return group_offsets(confluent_admin(cluster, timeout), [group], timeout)[group]


def group_members(admin: AdminClient, groups: Sequence[str],
                  timeout: float = 5.0) -> dict[tuple[str, str, int], tuple[str, str, str]]:
    """(group, topic, partition) -> (member id, client id, host) of the member it is assigned to, as
    DescribeGroups says (kafka-consumer-groups.sh --describe's CONSUMER-ID, CLIENT-ID, HOST). A group
    that can't be described adds nothing: who consumes is context, never a reason to fail the lag."""
    if not groups:
        return {}
    out: dict[tuple[str, str, int], tuple[str, str, str]] = {}
    try:
        futures = admin.describe_consumer_groups(list(groups), request_timeout=timeout)
    except (KafkaException, ValueError):
        return {}
    for g, f in futures.items():
        try:
            described = f.result(timeout=timeout + 1)
        except (KafkaException, TimeoutError):
            continue
        for m in described.members or []:
            for tp in (m.assignment.topic_partitions if m.assignment else []):
                out[(g, tp.topic, tp.partition)] = (m.member_id, m.client_id, m.host)
    return out
