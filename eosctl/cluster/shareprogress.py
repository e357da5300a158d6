"""Where a share group (KIP-932) stands: each share-partition's start offset and lag, and the isolation level
its consumers read with.

A share group commits no offsets (OffsetFetch knows nothing of it): its progress on a partition is the
share-partition start offset (SPSO), below which every record was acknowledged or archived, read by
DescribeShareGroupOffsets (API 90) from the group's coordinator; v1 (Kafka 4.4 answers v0-v1) adds the
broker's own lag (records from the start offset to the high watermark not yet acknowledged; -1 where it
does not know). A start offset of -1 is a partition not initialized yet (nothing read).

Its consumers' isolation is a group config, ``share.isolation.level`` (GroupConfig), default
``read_uncommitted``: the share-partition then hands out records up to the high watermark, aborted and
open transactions' records included. It is read from DescribeConfigs of the GROUP resource (type 32,
KIP-848's group configs), never assumed: a group someone set to read_committed is not warned about.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kafka.protocol.admin.configs import DescribeConfigsRequest

from eosctl.base.errors import BrokerError
from eosctl.cluster.messages import DescribeShareGroupOffsetsRequest
from eosctl.cluster.model import TP
from eosctl.cluster.offsets import _find_coordinators, _named, _Round
from eosctl.cluster.wire import WireClient

DESCRIBE_SHARE_GROUP_OFFSETS = 90
DESCRIBE_CONFIGS = 32
GROUP_RESOURCE = 32  # ConfigResource.Type.GROUP
ISOLATION_KEY = "share.isolation.level"
DEFAULT_ISOLATION = "read_uncommitted"  # GroupConfig.SHARE_ISOLATION_LEVEL_DEFAULT


@dataclass(frozen=True, slots=True)
class ShareOffset:
    start_offset: int  # the share-partition start offset; -1: not initialized
    lag: int | None  # the broker's lag (v1+); None where it does not say


def share_offsets(client: WireClient, groups: Sequence[str],
                  timeout: float | None = None) -> dict[str, dict[TP, ShareOffset]]:
    """Each share group's partitions (all it has state for) and their start offsets. A broker without the
    API answers {} for every group; a group its coordinator does not know (it vanished) {} too. Raises
    BrokerError when a coordinator refuses (naming the grant it needs) or does not answer in time."""
    wanted = list(dict.fromkeys(groups))
    if not wanted:
        return {}
    if client.max_version(DESCRIBE_SHARE_GROUP_OFFSETS) is None:
        return dict.fromkeys(wanted, {})
    step = _Round(client, timeout)
    out: dict[str, dict[TP, ShareOffset]] = {}
    pending = wanted
    while pending:
        coordinators = _find_coordinators(step, pending)
        ask = [g for g in pending if g in coordinators]
        answers = step.send([(coordinators[g].node, DescribeShareGroupOffsetsRequest(
            groups=[DescribeShareGroupOffsetsRequest.Groups(group_id=g, topics=None)])) for g in ask]) \
            if ask else []
        for g, answer in zip(ask, answers or (), strict=False):
            d = answer.groups[0]
            if d.error_code == 69:  # GROUP_ID_NOT_FOUND (4.4 answers a missing group with no topics instead)
                out[g] = {}
            elif d.error_code in (14, 15, 16):  # loading, moved: look again
                continue
            elif d.error_code:
                why = _named(d.error_code, "DescribeShareGroupOffsets", g)
                raise BrokerError(f"cannot read the share group {g!r}'s offsets from its coordinator at "
                                  f"{coordinators[g].address}: {why}")
            else:
                lag_known = answer.API_VERSION >= 1
                out[g] = {(t.topic_name, p.partition_index): ShareOffset(
                    p.start_offset, p.lag if lag_known and p.lag >= 0 else None)
                    for t in d.topics for p in t.partitions if not p.error_code}
        pending = [g for g in pending if g not in out]
        if pending and not step.again():
            raise step.fail(f"cannot read the share group {pending[0]!r}'s offsets from Kafka at "
                            f"{client.bootstrap}")
    return {g: out[g] for g in wanted}


def share_isolation(client: WireClient, groups: Sequence[str]) -> dict[str, str | None]:
    """Each group's ``share.isolation.level`` (DescribeConfigs, GROUP resource), None where the broker does
    not say (no group configs before Kafka 4.0, or describing them refused)."""
    wanted = list(dict.fromkeys(groups))
    if not wanted or client.max_version(DESCRIBE_CONFIGS) is None:
        return dict.fromkeys(wanted)
    request = DescribeConfigsRequest(resources=[
        DescribeConfigsRequest.DescribeConfigsResource(resource_type=GROUP_RESOURCE, resource_name=g,
                                                       configuration_keys=[ISOLATION_KEY]) for g in wanted],
        include_synonyms=False, include_documentation=False)
    try:
        answer = client.request_all([(client.any_node(), request)])[0]
    except BrokerError:
        return dict.fromkeys(wanted)
    found: dict[str, str | None] = {}
    for r in answer.results:
        if r.error_code:
            continue
        found[r.resource_name] = next((c.value for c in r.configs if c.name == ISOLATION_KEY), None)
    return {g: found.get(g) for g in wanted}
