"""make bench-breakdown still times every step it names, against the watcher as it is."""

from __future__ import annotations

from bench.breakdown import ORDER, WHOLE, measure


def test_every_step_of_a_writing_poll_is_timed() -> None:
    result = measure(polls=2, gap=0.01)
    writing = result["writing"]
    # a step whose function moved or was renamed would read 0 here, or fail to wrap
    assert {label for label in ORDER if writing.get(label, 0) <= 0} == set()
    assert writing[WHOLE] >= writing["publish"] > 0
