"""Waiver files and levels as written (eosctl.config.policy): what each key means, and one line for each
wrong one."""

from __future__ import annotations

from pathlib import Path

import pytest

from eosctl.base.errors import ConfigError
from eosctl.config.file import parse_config
from eosctl.config.policy import Level, load_waivers, parse_level
from eosctl.report.findings import KINDS


def waivers(tmp_path: Path, text: str):
    path = tmp_path / "waivers.toml"
    path.write_text(text)
    return load_waivers(path, KINDS)


def test_a_waiver_covers_its_range_wholly_until_it_expires(tmp_path: Path) -> None:
    (w, every) = waivers(tmp_path, """
[[waivers]]
topic = "orders"
partition = 0
kind = "gap"
first_offset = 10
last_offset = 19
reason = "replayed by hand"
reference = "INC-1"
expires = 2026-12-31

[[waivers]]
topic = "orders"
kind = "duplicate"
reason = "accepted"
expires = "2026-12-01T12:00:00Z"
""")
    assert w.covers("gap", "orders", 0, 10, 19) and w.covers("gap", "orders", 0, 12, 12)
    assert not w.covers("gap", "orders", 0, 15, 20)  # grew past the accepted range
    assert not w.covers("gap", "orders", 1, 12, 12) and not w.covers("duplicate", "orders", 0, 12, 12)
    assert every.covers("duplicate", "orders", 7, 0, 1_000_000)
    assert not every.covers("duplicate", "x", 7, 0, 0)
    # a date waives through that day (UTC); a time until then
    assert w.expires_ms == 1_798_761_600_000
    assert not w.expired(1_798_761_599_999) and w.expired(1_798_761_600_000)
    assert every.expires_ms == 1_796_126_400_000
    assert (w.reference, w.expires, every.partition) == ("INC-1", "2026-12-31", None)


@pytest.mark.parametrize(("text", "said"), [
    ('[[waivers]]\ntopic = "o"\nkind = "gap"\n', r"waivers\[0\]: missing key reason"),
    ('[[waivers]]\ntopic = "o"\nkind = "gaps"\nreason = "r"\n', "kind 'gaps' is not a finding kind"),
    ('[[waivers]]\ntopic = "o"\nkind = "gap"\nreason = "r"\nfirst_offset = 3\n', "give first_offset and"),
    ('[[waivers]]\ntopic = "o"\nkind = "gap"\nreason = "r"\nfirst_offset = 3\nlast_offset = 2\n', "is after"),
    ('[[waivers]]\ntopic = "o"\nkind = "gap"\nreason = "r"\nexpires = "soon"\n', "expires must be a date"),
    ('[[waivers]]\ntopic = "o"\nkind = "gap"\nreason = "r"\nuntil = 1\n', "unknown key 'until'"),
    ('[waiver]\n', "unknown key 'waiver'"),
    ('[[waivers]\n', "not valid TOML"),
])
def test_a_wrong_waiver_is_one_line(tmp_path: Path, text: str, said: str) -> None:
    with pytest.raises(ConfigError, match=said) as e:
        waivers(tmp_path, text)
    assert "\n" not in str(e.value) and str(tmp_path / "waivers.toml") in str(e.value)


def test_levels_as_written() -> None:
    assert parse_level("gap", "warn", "k") == Level("gap", 1, None)
    assert parse_level("gap", "fail", "k") == Level("gap", None, 1)
    assert parse_level("gap", {"warn": 2, "fail": 10}, "k") == parse_level("gap", "warn:2,fail:10", "k")
    level = Level("gap", 2, 10)
    assert [level.of(n) for n in (0, 1, 2, 9, 10)] == ["ok", "ok", "warn", "warn", "fail"]
    for bad in ("sometimes", {"warn": 0}, {"fail": True}, {"error": 1}, "warn:x"):
        with pytest.raises(ValueError, match="k: "):
            parse_level("gap", bad, "k")


def test_the_configs_audit_policy(tmp_path: Path) -> None:
    raw = {"clusters": {"c": {"bootstrap_servers": "h:1"}},
           "audit": {"waivers": "w.toml", "levels": {"gap": {"warn": 1, "fail": 5}, "duplicate": "warn"}}}
    cfg = parse_config(raw, tmp_path / "c.toml", {})
    assert cfg.audit_waivers == str(tmp_path / "w.toml")
    assert cfg.audit_levels == (Level("gap", 1, 5), Level("duplicate", 1, None))
    raw["audit"]["levels"] = {"gap": "never"}
    with pytest.raises(ConfigError, match=r"audit.levels.gap: expected"):
        parse_config(raw, tmp_path / "c.toml", {})
