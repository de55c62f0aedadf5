"""The chart's `processes.enabled` value and the watcher's --no-processes flag."""

from __future__ import annotations

from typing import Any

import pytest

from allocwatch.flags import build_parser
from tests.chart.helmtool import Helm, container


@pytest.mark.parametrize(
    ("values", "enabled"),
    [
        ({}, True),
        ({"processes": {"enabled": True}}, True),
        ({"processes": {"enabled": False}}, False),
        ({"processes": {}}, True),
        ({"processes": None}, True),
    ],
    ids=["default", "on", "off", "empty", "null"],
)
def test_processes_value_reaches_the_watcher(
    helm: Helm, values: dict[str, Any], enabled: bool
) -> None:
    args = container(helm.render(values))["args"]
    assert ("--no-processes" in args) is not enabled
    assert build_parser().parse_args(args).processes is enabled


def test_set_flag_turns_processes_off(helm: Helm) -> None:
    result = helm.template(None, "--set", "processes.enabled=false")
    assert "--no-processes" in container(result.objects())["args"]
