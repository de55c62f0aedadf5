"""Reading a pod's declared load from its annotations: values, precedence, refusals."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from allocwatch.declaredload import (
    ANNOTATIONS,
    GPU_MEMORY,
    GPU_UTILIZATION,
    MAX_MEMORY_BYTES,
    MAX_VALUE_LENGTH,
    NO_LOAD,
    RUNAI_UTILIZATION,
    SHOWN_LENGTH,
    DeclaredLoad,
    Problem,
    parse_annotations,
)

GI = 2**30


def shown(value: str) -> str:
    return value if len(value) <= SHOWN_LENGTH else value[:SHOWN_LENGTH] + "..."


def memory(value: str) -> tuple[DeclaredLoad, list[Problem]]:
    return parse_annotations({GPU_MEMORY: value})


def utilization(value: str, key: str = GPU_UTILIZATION) -> tuple[DeclaredLoad, list[Problem]]:
    return parse_annotations({key: value})


def test_no_annotations_declare_nothing() -> None:
    assert parse_annotations({}) == (NO_LOAD, [])
    assert parse_annotations({"example.com/other": "lots", "allocwatch.dev/x": "1"}) == (
        NO_LOAD,
        [],
    )
    assert DeclaredLoad() == NO_LOAD


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("20Gi", 20 * GI),
        ("512Mi", 512 * 2**20),
        ("1.5G", 1_500_000_000),
        ("1.5Gi", 3 * GI // 2),
        ("80G", 80_000_000_000),
        ("100k", 100_000),
        ("1Ki", 1024),
        ("2Ti", 2 * 2**40),
        ("1Pi", 2**50),
        ("1P", 10**15),
        ("1Ei", 2**60),
        ("1E", 10**18),  # exa, not an exponent
        ("1e9", 10**9),  # Kubernetes' decimal exponent: bytes
        ("5E3", 5000),
        ("1e+3", 1000),
        ("0Mi", 0),
        ("+5Gi", 5 * GI),
        (".5Gi", GI // 2),
        ("0.1", None),  # a fraction, below
        ("  20Gi\t", 20 * GI),
        ("7e-1", 1),  # a fractional byte count rounds up, as in Kubernetes
        ("1.0000001Ki", 1025),
    ],
)
def test_memory_quantities(value: str, expected: int | None) -> None:
    load, problems = memory(value)
    assert problems == []
    assert load.memory_bytes == expected
    assert load.utilization is None
    if expected is not None:
        assert load.memory_fraction is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("0.75", 0.75),
        (".75", 0.75),
        ("1", 1.0),
        ("1.0", 1.0),
        ("0.001", 0.001),
        ("75%", 0.75),
        ("100%", 1.0),
        ("12.5%", 0.125),
        ("0.5%", 0.005),
    ],
)
def test_memory_fractions_and_percentages(value: str, expected: float) -> None:
    load, problems = memory(value)
    assert problems == []
    assert load == DeclaredLoad(memory_fraction=expected)


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("lots", "expected a quantity such as 20Gi or 512Mi, or a fraction such as 0.75"),
        ("-5Gi", "must not be negative"),
        ("-0.5", "must not be negative"),
        ("200%", "above 0% and at most 100%"),
        ("0%", "above 0% and at most 100%"),
        ("0", "a fraction must be above 0"),
        ("0.0", "a fraction must be above 0"),
        ("2", "give a unit, such as 2Mi, 2Gi or 2G"),
        ("2.5", "give a unit, such as 2.5Mi, 2.5Gi or 2.5G"),
        ("20480", "give a unit"),
        ("512m", "'m' is a fraction of a byte: use Mi or M"),
        ("5u", "'u' is a fraction of a byte"),
        ("1e31", "the exponent must be within +-30"),
        ("1e-31", "the exponent must be within +-30"),
        ("1e99999999999999999999", "the exponent must be within +-30"),
        ("9" * 40 + "Ei", f"is more than {MAX_MEMORY_BYTES} bytes"),
        ("NaN", "expected a quantity"),
        ("nan", "expected a quantity"),
        ("inf", "expected a quantity"),
        ("-inf", "expected a quantity"),
        ("Infinity", "expected a quantity"),
        ("", "expected a quantity"),
        (".", "expected a quantity"),
        ("Gi", "expected a quantity"),
        ("20 Gi", "expected a quantity"),
        ("20gi", "expected a quantity"),
        ("20GB", "expected a quantity"),
        ("1_000Mi", "expected a quantity"),
        ("0x10Gi", "expected a quantity"),
        ("1,5Gi", "expected a quantity"),
        ("1e", "expected a quantity"),
        ("5%%", "expected a quantity"),
        ("\u0663Gi", "expected a quantity"),  # ARABIC-INDIC DIGIT THREE
        ("\uff13Gi", "expected a quantity"),  # FULLWIDTH DIGIT THREE
        ("\u00b2Gi", "expected a quantity"),  # SUPERSCRIPT TWO
        ("1\u00a0Gi", "expected a quantity"),  # a no-break space inside
        ("20Gi\n", "expected a quantity"),
    ],
)
def test_memory_refusals_name_the_annotation_and_why(value: str, reason: str) -> None:
    load, problems = memory(value)
    assert load == NO_LOAD, "a value that cannot be read leaves the pod on the defaults"
    assert len(problems) == 1
    assert problems[0].annotation == GPU_MEMORY
    assert problems[0].value == shown(value)
    assert reason in problems[0].reason


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("85", (85, 85)),
        ("60-90", (60, 90)),
        ("0", (0, 0)),  # allocated but idle
        ("100", (100, 100)),
        ("0-100", (0, 100)),
        ("85%", (85, 85)),
        ("60%-90%", (60, 90)),
        ("60-90%", (60, 90)),
        ("60 - 90", (60, 90)),
        (" 20-35 ", (20, 35)),
        ("50-50", (50, 50)),
        ("007", (7, 7)),
    ],
)
def test_utilization_percentages_and_bands(value: str, expected: tuple[int, int]) -> None:
    for key in (GPU_UTILIZATION, RUNAI_UTILIZATION):
        assert utilization(value, key) == (DeclaredLoad(utilization=expected), [])


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("90-60", "the band is upside down: write 60-90"),
        ("200%", "200 is above 100%"),
        ("101", "101 is above 100%"),
        ("50-101", "101 is above 100%"),
        ("-5", "expected a whole percentage (85) or a band (60-90), within 0-100"),
        ("50.5", "expected a whole percentage"),
        ("", "expected a whole percentage"),
        ("busy", "expected a whole percentage"),
        ("NaN", "expected a whole percentage"),
        ("inf", "expected a whole percentage"),
        ("60-", "expected a whole percentage"),
        ("-60", "expected a whole percentage"),
        ("60-70-80", "expected a whole percentage"),
        ("60--90", "expected a whole percentage"),
        ("6 0", "expected a whole percentage"),
        ("85 %", "expected a whole percentage"),
        ("\u0668\u0665", "expected a whole percentage"),  # Arabic-Indic 85
        ("1" * 60, f"{'1' * 60} is above 100%"),
    ],
)
def test_utilization_refusals(value: str, reason: str) -> None:
    for key in (GPU_UTILIZATION, RUNAI_UTILIZATION):
        load, problems = utilization(value, key)
        assert load == NO_LOAD
        assert [(p.annotation, p.value) for p in problems] == [(key, shown(value))]
        assert reason in problems[0].reason


def test_ours_wins_over_fake_gpu_operators_when_both_are_set() -> None:
    both = {GPU_UTILIZATION: "85", RUNAI_UTILIZATION: "20-35"}
    assert parse_annotations(both) == (DeclaredLoad(utilization=(85, 85)), [])
    assert parse_annotations({RUNAI_UTILIZATION: "20-35"}) == (
        DeclaredLoad(utilization=(20, 35)),
        [],
    )


def test_a_bad_value_of_ours_is_not_replaced_by_fake_gpu_operators() -> None:
    """Ours is the one the author meant: it is reported, and the pod keeps the default."""
    load, problems = parse_annotations({GPU_UTILIZATION: "lots", RUNAI_UTILIZATION: "20-35"})
    assert load == NO_LOAD
    assert [p.annotation for p in problems] == [GPU_UTILIZATION]
    # fake-gpu-operator's is not read at all then, so its problems are not ours to report
    load, problems = parse_annotations({GPU_UTILIZATION: "60", RUNAI_UTILIZATION: "lots"})
    assert (load, problems) == (DeclaredLoad(utilization=(60, 60)), [])


def test_memory_and_utilization_together_and_apart() -> None:
    load, problems = parse_annotations({GPU_MEMORY: "30Gi", GPU_UTILIZATION: "40"})
    assert (load, problems) == (DeclaredLoad(memory_bytes=30 * GI, utilization=(40, 40)), [])
    # one bad value does not cost the other
    load, problems = parse_annotations({GPU_MEMORY: "lots", GPU_UTILIZATION: "95"})
    assert load == DeclaredLoad(utilization=(95, 95))
    assert [p.annotation for p in problems] == [GPU_MEMORY]
    load, problems = parse_annotations({GPU_MEMORY: "0.75", GPU_UTILIZATION: "90-60"})
    assert load == DeclaredLoad(memory_fraction=0.75)
    assert [p.annotation for p in problems] == [GPU_UTILIZATION]
    load, problems = parse_annotations({GPU_MEMORY: "-1Gi", RUNAI_UTILIZATION: "101"})
    assert load == NO_LOAD
    assert [p.annotation for p in problems] == [GPU_MEMORY, RUNAI_UTILIZATION]


@pytest.mark.parametrize("key", ANNOTATIONS)
def test_an_over_long_value_is_refused_before_it_is_parsed(key: str) -> None:
    for value in ("1" * 1_000_000, "9" * (MAX_VALUE_LENGTH + 1), " " * (MAX_VALUE_LENGTH + 1)):
        load, problems = parse_annotations({key: value})
        assert load == NO_LOAD
        assert len(problems) == 1
        p = problems[0]
        assert p.annotation == key
        assert p.reason == (f"is {len(value)} characters long; at most {MAX_VALUE_LENGTH} are read")
        assert p.value == value[:SHOWN_LENGTH] + "...", "the problem never carries the value whole"
    # at the limit the value is read
    if key == GPU_MEMORY:
        at_limit, expected = "0" * (MAX_VALUE_LENGTH - 3) + "1Gi", DeclaredLoad(memory_bytes=GI)
    else:
        at_limit, expected = "0" * (MAX_VALUE_LENGTH - 2) + "85", DeclaredLoad(utilization=(85, 85))
    assert len(at_limit) == MAX_VALUE_LENGTH
    assert parse_annotations({key: at_limit}) == (expected, [])


def test_a_problem_reads_as_one_log_line() -> None:
    (_, [problem]) = memory("lots\nof\x1b[31mmemory")
    text = str(problem)
    assert text.startswith(f"{GPU_MEMORY}='lots\\nof\\x1b[31mmemory': expected a quantity")
    assert "\n" not in text and "\x1b" not in text


def test_a_value_that_is_not_a_string_is_a_problem() -> None:
    load, problems = parse_annotations({GPU_MEMORY: 20})  # type: ignore[dict-item]
    assert load == NO_LOAD
    assert [(p.annotation, p.value, p.reason) for p in problems] == [
        (GPU_MEMORY, "20", "is not a string")
    ]


# Property tests: nothing a pod writes raises, and what is read is in range.
# No deadline and no speed health check: a test must not depend on how fast
# the machine is; no example database either, so nothing is written to the tree.
PROPERTY = settings(
    deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None, max_examples=300
)

GRAMMAR = st.text(alphabet="0123456789.+-eEkKMGTPiumn% \t", max_size=MAX_VALUE_LENGTH + 8)
ANY_TEXT = st.one_of(st.text(max_size=MAX_VALUE_LENGTH * 2), GRAMMAR)


def check(load: DeclaredLoad, problems: list[Problem], present: set[str]) -> None:
    if load.memory_bytes is not None:
        assert 0 <= load.memory_bytes <= MAX_MEMORY_BYTES
        assert load.memory_fraction is None
    if load.memory_fraction is not None:
        assert 0 < load.memory_fraction <= 1
    if load.utilization is not None:
        lo, hi = load.utilization
        assert 0 <= lo <= hi <= 100
        assert isinstance(lo, int) and isinstance(hi, int)
    for p in problems:
        assert p.annotation in present
        assert len(p.value) <= SHOWN_LENGTH + 3
        assert p.reason
    # each key read gives a value or a problem, never both, never neither
    memory_read = load.memory_bytes is not None or load.memory_fraction is not None
    memory_refused = any(p.annotation == GPU_MEMORY for p in problems)
    assert memory_read != memory_refused if GPU_MEMORY in present else not memory_refused
    read = [key for key in (GPU_UTILIZATION, RUNAI_UTILIZATION) if key in present][:1]
    if read:
        refused = any(p.annotation == read[0] for p in problems)
        assert (load.utilization is not None) != refused
    else:
        assert load.utilization is None
    # fake-gpu-operator's is not read when ours is set, so it is never reported then
    assert {p.annotation for p in problems} <= {GPU_MEMORY, *read}
    assert len(problems) <= 2


@PROPERTY
@given(st.dictionaries(st.sampled_from(ANNOTATIONS), ANY_TEXT, max_size=3))
def test_any_annotations_give_values_in_range_or_problems(annotations: dict[str, str]) -> None:
    load, problems = parse_annotations(annotations)
    check(load, problems, set(annotations))


@PROPERTY
@given(GRAMMAR)
def test_any_memory_text_close_to_the_grammar(value: str) -> None:
    load, problems = memory(value)
    check(load, problems, {GPU_MEMORY})


@PROPERTY
@given(st.text(alphabet="0123456789-% \t", max_size=MAX_VALUE_LENGTH + 8))
def test_any_utilization_text_close_to_the_grammar(value: str) -> None:
    load, problems = utilization(value)
    check(load, problems, {GPU_UTILIZATION})


@PROPERTY
@given(
    st.integers(min_value=0, max_value=10**6),
    st.sampled_from(["Ki", "Mi", "Gi", "Ti", "k", "M", "G", "T"]),
)
def test_whole_quantities_are_exact(number: int, unit: str) -> None:
    scale = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}.get(unit) or 10 ** (
        3 * "kMGT".index(unit) + 3
    )
    assert memory(f"{number}{unit}") == (DeclaredLoad(memory_bytes=number * scale), [])


@PROPERTY
@given(st.integers(min_value=0, max_value=100), st.integers(min_value=0, max_value=100))
def test_every_band_in_range_reads_back_or_says_write_it_the_other_way(lo: int, hi: int) -> None:
    load, problems = utilization(f"{lo}-{hi}")
    if lo <= hi:
        assert (load, problems) == (DeclaredLoad(utilization=(lo, hi)), [])
    else:
        assert load == NO_LOAD
        assert problems[0].reason == f"the band is upside down: write {hi}-{lo}"


@PROPERTY
@given(st.integers(min_value=1, max_value=10**6))
def test_a_fraction_in_range_reads_back(thousandths: int) -> None:
    value = thousandths / 10**6
    load, problems = memory(f"{value:.6f}")
    assert problems == []
    assert load.memory_fraction == pytest.approx(value)
