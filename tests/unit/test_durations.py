from __future__ import annotations

import pytest

from allocwatch.durations import format_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("500ms", 0.5),
        ("2s", 2.0),
        ("1m30s", 90.0),
        ("1.5s", 1.5),
        ("0.25", 0.25),
        ("3", 3.0),
        ("1h", 3600.0),
        ("250us", 0.00025),
        ("100ns", 1e-7),
        ("+1s", 1.0),  # Go takes a sign
        ("-1m30s", -90.0),  # and the CLI then refuses it as out of range
        ("2e-1", 0.2),
    ],
)
def test_parses_go_durations_and_seconds(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "2x",
        "s",
        "1m30",
        "nan",
        "inf",
        "-",
        "+",
        "1 s",
        "1_0",
        "1_0s",
        "٣",
        "٣s",
        "1e999",
        "1e3ms",
    ],
)
def test_rejects_non_durations(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


@pytest.mark.parametrize(
    ("seconds", "text"), [(0.5, "500ms"), (2.0, "2s"), (90.0, "1m30s"), (3600.0, "1h0m0s")]
)
def test_formats_like_go(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text
