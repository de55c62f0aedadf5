"""Log lines stay one bounded line, whatever names pods and files carry."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from allocwatch.logs import TextFormatter
from allocwatch.metrics import Metrics
from allocwatch.profile import Device
from allocwatch.readings import Readings
from allocwatch.reconcile import MemoryReading, Reconciliation
from allocwatch.reporter import Reporter


def text_line(message: str, *args: object) -> str:
    record = logging.LogRecord("allocwatch", logging.INFO, __file__, 1, message, args, None)
    return TextFormatter("%(levelname)s %(message)s").format(record)


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("\x1b[2J\x1b[31mred", "\\x1b[2J\\x1b[31mred"),
        ("fake\r2026-01-01 ERROR forged", "fake\\x0d2026-01-01 ERROR forged"),
        ("one\u2028two\u2029three", "one\\u2028two\\u2029three"),
        ("a\x85b\x00c\x7fd", "a\\x85b\\x00c\\x7fd"),
        ("GPU-\u202eabc", "GPU-\\u202eabc"),
    ],
)
def test_text_logs_escape_control_characters(raw: str, shown: str) -> None:
    assert text_line("id %s", raw) == f"INFO id {shown}"


def test_text_logs_still_join_a_multi_line_message_with_spaces() -> None:
    assert (
        text_line("not valid YAML:\r\n  line 2\n\tline 3") == "INFO not valid YAML: line 2 line 3"
    )


def published_unknown(caplog: pytest.LogCaptureFixture, ids: list[str]) -> str:
    reporter = Reporter(Metrics(), Path("overrides.yaml"))
    device = Device(0, "GPU-" + "u" * 1_000_000, 80 << 30, 0)
    rec = Reconciliation({0: MemoryReading(0, 80 << 30)}, [], {0: []}, tuple(ids))
    with caplog.at_level(logging.INFO, logger="allocwatch.watch"):
        reporter.published([device], Readings(rec, {}), wrote=True)
    return caplog.text


def test_a_flood_of_unknown_ids_logs_a_bounded_line_that_counts_the_rest(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ids = [f"GPU-{i:08d}" for i in range(99_900)]
    text = published_unknown(caplog, ids)
    (line,) = [x for x in text.splitlines() if "ids matching no profile device" in x]
    assert len(line) < 2_000
    assert "GPU-00000000, GPU-00000001" in line
    assert line.rstrip().endswith(" and 99880 more")


def test_a_huge_id_is_logged_cut_with_its_length(caplog: pytest.LogCaptureFixture) -> None:
    text = published_unknown(caplog, ["x" * 1_000_000])
    assert len(text) < 5_000  # the device line's 1 MB uuid is cut too
    assert "x" * 128 + "...(+999872 chars)" in text
    assert "GPU-" + "u" * 124 + "...(+999876 chars)" in text
