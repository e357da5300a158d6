"""The aggregate rule (eosctl.rules.aggregate): a key's fold against its committed records', and the one
run of records that explains a difference."""

from __future__ import annotations

from eosctl.rules.aggregate import judge
from eosctl.rules.upsert import StateRecord, StateRow

T = "orders"


def rec(offset: int, key: str, n: float | None, status: str = "committed") -> StateRecord:
    return StateRecord(T, 0, offset, (key,), (None if n is None else str(n),), n is None, str(n), status)


def found(fn: str, records, rows: dict[str, str], bound: int = 1000) -> list[tuple]:
    judged = judge(records, [StateRow((k,), (v,), v) for k, v in rows.items()], {(T, 0): bound}, fn,
                   field=None if fn == "count" else "value.n", shown_key=lambda k: k[0], topic=T)
    return [(f.kind, f.first_offset, f.last_offset, f.count, f.key,
             f.cause.rule if f.kind == "aggregate_mismatch" else None, f.detail)
            for f in sorted(judged.findings, key=lambda f: f.sort_key)]


LOG = [rec(120, "a", 5), rec(121, "a", 7), rec(122, "a", 11), rec(123, "b", 2), rec(124, "a", 13),
       rec(125, "a", 17), rec(126, "b", None), rec(127, "a", 40, "aborted")]


def test_the_right_folds_are_clean():
    assert found("sum", LOG, {"a": "53", "b": "2"}) == []
    assert found("sum", LOG, {"a": "53.0", "b": "2.0000000000001"}) == []  # a float column's rounding
    assert found("count", LOG, {"a": "5", "b": "1"}) == []
    assert found("min", LOG, {"a": "5", "b": "2"}) == []
    assert found("max", LOG, {"a": "17", "b": "2"}) == []


def test_a_double_count_a_loss_and_aborted_records_are_named_by_their_offsets():
    assert found("sum", LOG, {"a": "71", "b": "2"}) == [
        ("aggregate_mismatch", 121, 122, 2, "a", "counted_twice",
         "expected 53 (sum(value.n) of 5 committed records up to offset 125), found 71: counted offsets "
         "121-122 twice")]
    assert found("sum", LOG, {"a": "35", "b": "2"}) == [
        ("aggregate_mismatch", 121, 122, 2, "a", "missing_records",
         "expected 53 (sum(value.n) of 5 committed records up to offset 125), found 35: missing offsets "
         "121-122")]
    assert found("sum", LOG, {"a": "93", "b": "2"})[0][5] == "counted_aborted"
    assert found("max", LOG, {"a": "11", "b": "2"})[0][1:6] == (124, 125, 2, "a", "missing_records")


def test_several_explanations_are_none_and_lag_is_no_finding():
    # count: every run of two of a's five records fits: no one explanation
    assert [f[5] for f in found("count", LOG, {"a": "7", "b": "1"})] == ["unexplained_difference"]
    # read point 124: a's fold may be 23 (settled) or 36, 53 (the next committed records applied)
    assert found("sum", LOG, {"a": "36", "b": "2"}, bound=124) == []
    assert found("sum", LOG, {"a": "23", "b": "2"}, bound=124) == []


def test_missing_and_unknown_keys():
    assert [(f[0], f[4], f[6]) for f in found("sum", LOG, {"b": "2", "z": "1"})] == [
        ("unknown_key", "z", "sink holds 1"),
        ("missing_key", "a", "no row; expected sum(value.n) 53 (up to offset 125)")]


def test_a_version_column_is_the_rows_own_read_point():
    rows = [StateRow(("a",), ("23",), "23", 122), StateRow(("b",), ("2",), "2", 123)]
    judged = judge(LOG, rows, {(T, 0): 1000}, "sum", field="value.n", shown_key=lambda k: k[0])
    assert judged.findings == []  # a folded up to offset 122: 5 + 7 + 11
    rows[0] = StateRow(("a",), ("30",), "30", 122)
    [f] = judge(LOG, rows, {(T, 0): 1000}, "sum", field="value.n", shown_key=lambda k: k[0]).findings
    assert (f.kind, f.cause.rule, f.offsets) == ("aggregate_mismatch", "counted_twice", (121,))
