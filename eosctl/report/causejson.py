"""A finding's cause as the JSON text its audit task wrote, decoded only where something reads it.

An audit task explains its findings and sends each cause to the driver as JSON (auditors.task). Decoding
100k of them back into Cause and TxnCause objects cost the driver about a second, and encoding them again
for the report another: the snapshot, which stores the report and each finding's summary, reads neither.
An ``EncodedCause`` keeps the text and the few fields the driver reads for every finding (what
eosctl.report.rootcauses.root_rule asks; the summary, the text's first field, is read out of the text alone);
any other field decodes the whole cause once, exactly as ``Cause.from_dict`` always did, and the report's JSON
splices the text in as it is (eosctl.report.compactjson).
"""

from __future__ import annotations

import json
from json.decoder import scanstring  # type: ignore[attr-defined]
from json.encoder import encode_basestring_ascii as _string
from typing import Any

from eosctl.report.findings import Cause, TxnCause

# Read without decoding: kept beside the text (auditors.task ships them as columns of their own); and the
# summary, read out of the text (every cause's JSON starts with it: Cause.to_dict).
EAGER = ("kind", "passed_by", "sink_after", "rule")
_SUMMARY = '{"summary": "'

# The kinds found by the hundred thousand, written here by hand; the others through json.dumps.
_BY_HAND = ("gap", "phantom_aborted", "phantom_uncommitted")


def encode(cause: Cause) -> str:
    """The cause's JSON text: the very bytes `json.dumps(cause.to_dict())` gives (a report splices it;
    tests/unit/report/test_compactjson.py compares them)."""
    if isinstance(cause, EncodedCause):
        return cause.text
    if cause.kind not in _BY_HAND:
        return json.dumps(cause.to_dict())
    out = [f'{{"summary": {value(cause.summary)}, "transactions": [',
           ", ".join(map(_txn, cause.transactions)), "]"]
    if cause.omitted:
        out.append(f', "omitted": {value(cause.omitted)}')
    if cause.kind == "gap":
        out.append(f', "sink_before": {value(cause.sink_before)}, "sink_after": {value(cause.sink_after)}, '
                   f'"passed_by": {value(cause.passed_by)}')
    out.append("}")
    return "".join(out)


# An outcome's JSON, for the few outcomes there are.
_OUTCOMES = {o: _string(o) for o in ("committed", "aborted", "open", "non_transactional")}


def _txn(t: TxnCause) -> str:
    d = t.__dict__
    pid, epoch, first, last, marker = (d["producer_id"], d["producer_epoch"], d["first_offset"],
                                       d["last_offset"], d["marker_offset"])
    if (type(pid) is int and type(epoch) is int and type(first) is int and type(last) is int
            and (marker is None or type(marker) is int) and d["outcome"] in _OUTCOMES
            and d["topic"] is None and type(d["fenced"]) is bool):
        # What nearly every transaction is: plain ints, as json.dumps writes them.
        return (f'{{"producer_id": {pid}, "producer_epoch": {epoch}, "first_offset": {first}, '
                f'"last_offset": {last}, "outcome": {_OUTCOMES[d["outcome"]]}, '
                f'"marker_offset": {"null" if marker is None else marker}, '
                f'"fenced": {"true" if d["fenced"] else "false"}}}')
    text = (f'{{"producer_id": {value(t.producer_id)}, "producer_epoch": {value(t.producer_epoch)}, '
            f'"first_offset": {value(t.first_offset)}, "last_offset": {value(t.last_offset)}, '
            f'"outcome": {value(t.outcome)}, "marker_offset": {value(t.marker_offset)}, '
            f'"fenced": {value(t.fenced)}')
    if t.topic is not None:
        text += f', "topic": {value(t.topic)}, "partition": {value(t.partition)}'
    return text + "}"


def value(v: Any) -> str:
    """One scalar as json.dumps writes it; anything but a plain str, int, bool or None goes through
    json.dumps."""
    if v is None:
        return "null"
    t = type(v)
    if t is str:
        return _string(v)
    if t is int:
        return int.__repr__(v)
    if t is bool:
        return "true" if v else "false"
    return json.dumps(v)


class EncodedCause(Cause):
    """A Cause read from its JSON text on first use of a field beyond EAGER. It equals, hashes, pickles and
    `dataclasses.replace`s as the decoded Cause (replace gives a plain Cause)."""

    text: str  # the cause's JSON text, set by `of` in the instance's __dict__ (not a dataclass field)

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        # dataclasses.replace() calls the class with every field: that makes the plain Cause.
        if args or kwargs:
            return Cause(*args, **kwargs)
        return object.__new__(cls)

    @classmethod
    def of(cls, kind: str, text: str, passed_by: str | None = None, sink_after: int | None = None,
           rule: str | None = None) -> EncodedCause:
        out = object.__new__(cls)
        object.__setattr__(out, "__dict__", {"kind": kind, "passed_by": passed_by, "sink_after": sink_after,
                                             "rule": rule, "text": text})
        return out

    @property
    def summary(self) -> str:
        """The cause's sentence, read out of the text (its first field) without decoding the rest."""
        d = self.__dict__
        got = d.get("_summary")
        if got is None:
            text = d["text"]
            got = scanstring(text, len(_SUMMARY))[0] if text.startswith(_SUMMARY) else self.decoded().summary
            d["_summary"] = got
        return got

    def decoded(self) -> Cause:
        """The plain Cause, decoded once."""
        full = self.__dict__.get("_decoded")
        if full is None:
            full = Cause.from_dict(self.kind, json.loads(self.text))
            self.__dict__["_decoded"] = full
        return full

    def to_dict(self) -> dict[str, Any]:
        return self.decoded().to_dict()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, EncodedCause):
            return self.decoded() == other.decoded()
        return self.decoded() == other if isinstance(other, Cause) else NotImplemented

    def __hash__(self) -> int:
        return hash(self.decoded())

    def __repr__(self) -> str:
        return repr(self.decoded())

    def __reduce__(self) -> tuple[Any, ...]:
        d = self.__dict__
        return _rebuild, (d["kind"], d["text"], d["passed_by"], d["sink_after"], d["rule"])


def _rebuild(*args: Any) -> EncodedCause:
    return EncodedCause.of(*args)


def _lazy(name: str) -> property:
    return property(lambda self: getattr(self.decoded(), name), doc=f"Cause.{name}, decoded on first use")


for _name in Cause.__dataclass_fields__:
    if _name not in EAGER and _name != "summary":
        setattr(EncodedCause, _name, _lazy(_name))
