"""Tests that must run under CI: there, a skip is reported as a failure.

A conftest that imports `pytest_runtest_makereport` from here applies the rule
to its directory. CI is on when the environment sets CI, and not to "0" or
"false".
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest


def under_ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if report.skipped and under_ci() and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.longrepr = f"skipped under CI, where these tests must run: {reason}"
