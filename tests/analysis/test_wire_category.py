"""The wire's categories (request, notification) are one rule, protocol_rules.wire_category, that the lab summary,
the analysis' wire counts, the notices and the Spark column share: it answers as each place's own spelling did
before, on every wire record of the fixed set, and the Spark column as the Python rule on every combination."""

from __future__ import annotations

import itertools
import json
import tarfile
from typing import Any

import pytest
from fixed_set import ARCHIVE

from zkconsumer.lab.rules.noticing import REJOIN_API, notice_member
from zkconsumer.lab.rules.protocol import NOTIFICATION, REQUEST, wire_category, wire_category_column


def _before(r: dict[str, Any]) -> str | None:
    """per_run/counts._category as it was spelled before the rule (the summary's zk and kafka cases agreed)."""
    proto, kind = r.get("proto"), r.get("kind")
    if proto == "zk":
        return {"request": "request", "event": "notification"}.get(kind)
    if proto == "kafka" and kind == "request":
        return "request"
    if proto == "kafka" and kind == "response" and (
            r.get("error_name") == "REBALANCE_IN_PROGRESS"
            or (r.get("api_name") == "ConsumerGroupHeartbeat" and r.get("assigned") is not None)):
        return "notification"
    return None


def _notice_before(r: dict[str, Any]) -> str | None:
    proto, kind = r.get("proto"), r.get("kind")
    if proto == "zk" and kind == "event":
        return r.get("link")
    if proto == "kafka" and ((kind == "response" and r.get("error_name") == "REBALANCE_IN_PROGRESS")
                             or (kind == "request" and r.get("api_name") == REJOIN_API)
                             or (kind == "response" and r.get("api_name") == "ConsumerGroupHeartbeat"
                                 and r.get("assigned") is not None)):
        return r.get("link") or r.get("client_id")
    return None


def _wire_records() -> list[dict[str, Any]]:
    found = []
    with tarfile.open(ARCHIVE) as archive:
        for member in archive.getmembers():
            if member.isfile() and member.name.endswith(".jsonl"):
                for line in archive.extractfile(member).read().decode().splitlines():  # type: ignore[union-attr]
                    try:
                        record = json.loads(line)
                    except ValueError:
                        continue
                    if record.get("type") == "wire":
                        found.append(record)
    return found


def _category(r: dict[str, Any]) -> str | None:
    return wire_category(r.get("proto"), r.get("kind"), r.get("error_name"), r.get("api_name"), r.get("assigned"))


def test_the_rule_answers_as_each_place_did_on_every_wire_record_of_the_fixed_set() -> None:
    records = _wire_records()
    seen = {(r["proto"], _category(r)) for r in records}
    assert {("zk", REQUEST), ("zk", NOTIFICATION), ("kafka", REQUEST), ("kafka", NOTIFICATION)} <= seen
    assert [_category(r) for r in records] == [_before(r) for r in records]
    assert [notice_member(r) for r in records] == [_notice_before(r) for r in records]


PROTOS = ["zk", "kafka", "other", None]
KINDS = ["request", "event", "response", "reply", "ping", None]
ERRORS = ["REBALANCE_IN_PROGRESS", "NONE", None]
APIS = ["ConsumerGroupHeartbeat", "JoinGroup", None]
ASSIGNED = [3, None]
GRID = list(itertools.product(PROTOS, KINDS, ERRORS, APIS, ASSIGNED))


def test_the_rule_on_every_combination_matches_the_former_spelling() -> None:
    for proto, kind, error, api, assigned in GRID:
        r = {"proto": proto, "kind": kind, "error_name": error, "api_name": api, "assigned": assigned}
        assert wire_category(proto, kind, error, api, assigned) == _before(r), r


@pytest.mark.slow
def test_the_spark_column_answers_as_the_python_rule(spark) -> None:
    df = spark.createDataFrame(GRID, "proto string, kind string, error_name string, api_name string, assigned int")
    rows = df.select("*", wire_category_column("proto", "kind", "error_name", "api_name", "assigned")
                     .alias("category")).collect()
    assert len(rows) == len(GRID)
    for row in rows:
        assert row["category"] == wire_category(row["proto"], row["kind"], row["error_name"], row["api_name"],
                                                row["assigned"]), row
