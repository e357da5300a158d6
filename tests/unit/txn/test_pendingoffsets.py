"""The group's __consumer_offsets partition, as Kafka's group coordinator computes it, and what a pending
offset commit says (eosctl.txn.pendingoffsets; read from a real broker in
tests/integration/test_pending_offsets.py)."""

from __future__ import annotations

from eosctl.txn.pendingoffsets import Holder, PendingCommit, java_string_hash, offsets_partition


def test_java_string_hash_is_java_s_over_utf16_code_units() -> None:
    # Values printed by jshell (OpenJDK 17): String.hashCode, a surrogate pair counting as two units.
    assert java_string_hash("stage-group") == -1089792272
    assert java_string_hash("é€𝄞g") == 519296634
    assert java_string_hash("polygenelubricants") == -2147483648  # Integer.MIN_VALUE
    assert java_string_hash("") == 0


def test_offsets_partition_is_utils_abs_of_the_hash_modulo_the_partitions() -> None:
    # Utils.abs is Math.abs, with Integer.MIN_VALUE taken to 0: a negative hash is negated, not masked
    # (& 0x7fffffff would say 26 here; Kafka's group coordinator puts the group on 22).
    assert offsets_partition("stage-group", 50) == 1089792272 % 50 == 22
    assert offsets_partition("polygenelubricants", 50) == 0


def test_the_coordinator_s_listed_transaction_is_named_before_the_others_on_the_partition() -> None:
    mine = Holder(4001, 3, 220, "stage-1", "Ongoing", 1_000, listed=True)
    other = Holder(5002, 0, 180, "other-app", "Ongoing", 2_000, listed=False)
    held = PendingCommit("g", frozenset({("orders", 0)}), 26, (other, mine))
    assert held.likely == (mine,)
    assert held.describe(61_000) == "pending in transaction stage-1 (pid 4001), open 1m00s"
    unknown = PendingCommit("g", frozenset({("orders", 0)}), 26, (Holder(9, 0, 7),))
    assert unknown.describe(0) == "pending in transaction pid 9"
    assert unknown.to_dict(0)["transactions"] == [{
        "transactional_id": None, "producer_id": 9, "producer_epoch": 0, "coordinator_state": None,
        "first_offset": 7, "started_ms": None, "age_s": None}]
    blind = PendingCommit("g", frozenset({("orders", 0)}), None, problem="cannot describe __consumer_offsets")
    assert blind.describe(0) == "pending in an open transaction (cannot describe __consumer_offsets)"
