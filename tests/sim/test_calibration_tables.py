"""Latency tables fitted per design from real runs (zkconsumer/lab/sim/calibrate.py) and the out-of-sample
predictions made with them (zkconsumer/lab/analysis/calibration.py): a consumer-protocol run's tables hold its own
ConsumerGroupHeartbeat round trips and no classic Heartbeat, and a prediction with them must draw every API from
what the runs measured."""

from __future__ import annotations

import pytest

from zkconsumer.lab.analysis.calibration import heartbeat_api, simulate
from zkconsumer.lab.rules.protocol import GROUP_HEARTBEAT_API
from zkconsumer.lab.sim.calibrate import _latency

QUANTILES = 101


def _table(ms: float) -> tuple[float, ...]:
    return tuple(ms * (1 + i / 100) for i in range(QUANTILES))


def _response(api: str, latency_ms: float) -> dict:
    return {"type": "wire", "proto": "kafka", "kind": "response", "api_name": api, "latency_ms": latency_ms,
            "error_name": None, "conn": 1, "correlation_id": 7, "ts": 1.0}


def test_a_consumer_group_heartbeat_is_a_round_trip_the_tables_fit() -> None:
    """KIP-848's coordinator answers each ConsumerGroupHeartbeat at once, so its latency is a round trip."""
    assert _latency(_response(GROUP_HEARTBEAT_API, 3.5)) == ("kafka", GROUP_HEARTBEAT_API, 3.5)
    assert _latency(_response("Heartbeat", 2.0)) == ("kafka", "Heartbeat", 2.0)


def test_a_consumer_protocol_prediction_uses_its_own_heartbeat_table() -> None:
    """Tables fitted from consumer-protocol runs (no classic Heartbeat): the prediction runs, and a slower
    heartbeat round trip gives a later time to stable, so the table is the one drawn from."""
    key = (4, 12, 500, 6000)
    fast = {"FindCoordinator": _table(1.0), "OffsetCommit": _table(1.0), GROUP_HEARTBEAT_API: _table(1.0)}
    slow = {**fast, GROUP_HEARTBEAT_API: _table(200.0)}
    _, _, _, quick = simulate(("consumer", key, 0, fast))
    _, _, _, late = simulate(("consumer", key, 0, slow))
    assert quick is not None and late is not None and late > quick
    assert heartbeat_api(fast) == GROUP_HEARTBEAT_API
    assert heartbeat_api({**fast, "Heartbeat": _table(1.0)}) == "Heartbeat"
    with pytest.raises(ValueError, match="no heartbeat round trip"):
        heartbeat_api({"FindCoordinator": _table(1.0)})
