"""The chart's `activity` values and the watcher's --no-activity and --busy-utilization flags."""

from __future__ import annotations

from typing import Any

import pytest

from allocwatch.activity import Band
from allocwatch.flags import build_parser
from tests.chart.helmtool import Helm, container


@pytest.mark.parametrize(
    ("values", "enabled", "band"),
    [
        ({}, True, Band(70, 90)),
        ({"activity": {"enabled": True}}, True, Band(70, 90)),
        ({"activity": {"enabled": False}}, False, None),
        ({"activity": {}}, True, Band(70, 90)),
        ({"activity": None}, True, Band(70, 90)),
        ({"activity": {"busyUtilization": "40-60"}}, True, Band(40, 60)),
        ({"activity": {"busyUtilization": 85}}, True, Band(85, 85)),
        ({"activity": {"busyUtilization": "0"}}, True, Band(0, 0)),
    ],
    ids=["default", "on", "off", "empty", "null", "band", "number", "idle"],
)
def test_activity_values_reach_the_watcher(
    helm: Helm, values: dict[str, Any], enabled: bool, band: Band | None
) -> None:
    args = container(helm.render(values))["args"]
    assert ("--no-activity" in args) is not enabled
    parsed = build_parser().parse_args(args)
    assert parsed.activity is enabled
    if band is not None:
        assert parsed.busy_utilization == band
