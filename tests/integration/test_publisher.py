"""The publisher on a real directory: write-on-change, restore, remove readings."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest
import yaml

from allocwatch import publisher
from allocwatch.document import DocumentError, parse_document
from allocwatch.publisher import OverridesPublisher, PublishError
from allocwatch.reconcile import MemoryReading
from tests.support.documents import wanted, withdrawal

R = MemoryReading


# Hand-written values as the engine reads them (go-yaml v2), where PyYAML's own
# YAML 1.1 reading differs: kept as the engine reads them through a publish.
HAND_WRITTEN = [
    ("y", True), ("n", False), ("1e3", 1000.0), ("9e1", 90.0), ("8.5e1", 85.0),
    ("0o17", 15), ("0X1F", 31), ("08", 8.0), ("1:30", "1:30"), ("=", "="), ("017", 15),
]  # fmt: skip


def test_hand_written_values_keep_the_engines_reading_through_a_publish(target: Path) -> None:
    target.write_text(
        "all:\n" + "".join(f"  k{i}: {text}\n" for i, (text, _) in enumerate(HAND_WRITTEN))
    )
    assert OverridesPublisher(target).publish(wanted({0: R(1, 2)})).wrote
    written = target.read_text()
    expected = {f"k{i}": value for i, (_, value) in enumerate(HAND_WRITTEN)}
    assert parse_document(written)["all"] == expected
    # What we wrote reads the same under YAML 1.1 too: nothing is left ambiguous.
    assert yaml.safe_load(written)["all"] == expected


@pytest.fixture
def target(tmp_path: Path) -> Path:
    return tmp_path / "overrides.yaml"


def test_first_publish_creates_a_0644_file_and_a_lock(target: Path) -> None:
    pub = OverridesPublisher(target)
    assert pub.publish(wanted({0: R(1, 2)})).wrote
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert parse_document(target.read_text())["devices"]["0"]["memory"] == {
        "used_bytes": 1,
        "free_bytes": 2,
    }
    assert target.with_name("overrides.yaml.lock").exists()
    assert [p.name for p in target.parent.iterdir() if p.name.endswith(".tmp")] == []


def test_no_readings_create_no_file(target: Path) -> None:
    pub = OverridesPublisher(target)
    assert not pub.publish(wanted({})).wrote
    assert not target.exists()
    assert not target.with_name("overrides.yaml.lock").exists()


def test_a_temp_file_left_by_a_crashed_write_is_reused(target: Path) -> None:
    tmp = target.with_name(".overrides.yaml.allocwatch.tmp")
    tmp.write_text("devices: {0: {memory: {used_bytes: 99999999")  # cut short
    tmp.chmod(0o600)
    assert OverridesPublisher(target).publish(wanted({0: R(1, 2)})).wrote
    assert not tmp.exists()
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert parse_document(target.read_text())["devices"]["0"]["memory"]["used_bytes"] == 1


def test_a_symlink_at_the_temp_name_is_not_followed(target: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("keep\n")
    target.with_name(".overrides.yaml.allocwatch.tmp").symlink_to(elsewhere)
    pub = OverridesPublisher(target)
    with pytest.raises(PublishError, match="write"):
        pub.publish(wanted({0: R(1, 2)}))
    assert elsewhere.read_text() == "keep\n"
    assert pub.publish(wanted({0: R(1, 2)})).wrote  # the link was removed with the failed write


def test_unchanged_readings_write_nothing(target: Path) -> None:
    pub = OverridesPublisher(target)
    assert pub.publish(wanted({0: R(1, 2)})).wrote
    st = target.stat()
    for _ in range(50):
        assert not pub.publish(wanted({0: R(1, 2)})).wrote
    assert target.stat().st_ino == st.st_ino and target.stat().st_mtime_ns == st.st_mtime_ns


def test_our_own_write_is_not_parsed_again_but_an_edit_is(
    target: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target.write_text("all:\n  performance_state: P8\nversion: 1\n")
    pub = OverridesPublisher(target)
    parsed: list[str] = []
    real_parse = publisher.parse_document
    monkeypatch.setattr(
        publisher, "parse_document", lambda text: parsed.append(text) or real_parse(text)
    )
    assert pub.publish(wanted({0: R(1, 2)})).wrote
    assert len(parsed) == 1  # the human's document, before merging into it
    assert not pub.publish(wanted({0: R(1, 2)})).wrote
    assert pub.publish(wanted({0: R(3, 0)})).wrote
    assert len(parsed) == 1
    target.write_text(target.read_text().replace("P8", "P0"))
    assert pub.publish(wanted({0: R(5, 0)})).wrote
    assert len(parsed) == 2
    doc = parse_document(target.read_text())
    assert doc["all"] == {"performance_state": "P0"}
    assert doc["devices"]["0"]["memory"] == {"used_bytes": 5, "free_bytes": 0}


def test_equivalent_document_written_by_others_is_not_rewritten(target: Path) -> None:
    target.write_text(
        '{"devices": {"0": {"memory": {"free_bytes": 2, "used_bytes": 1}}}, "version": 1}'
    )
    pub = OverridesPublisher(target)
    assert not pub.publish(wanted({0: R(1, 2)})).wrote


@pytest.mark.parametrize("written", ["1.0", "1e0", "true"])
def test_an_equal_but_not_integer_reading_is_rewritten_as_an_integer(
    target: Path, written: str
) -> None:
    """Equal in Python is not enough: the readings are written as integers (contract §3)."""
    target.write_text(f"devices: {{'0': {{memory: {{used_bytes: {written}, free_bytes: 2}}}}}}\n")
    pub = OverridesPublisher(target)
    assert pub.publish(wanted({0: R(1, 2)})).wrote
    assert "used_bytes: 1\n" in target.read_text()
    assert parse_document(target.read_text())["devices"]["0"]["memory"]["used_bytes"] == 1


def test_a_due_write_reads_the_file_once_and_an_idle_poll_once(
    target: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pub = OverridesPublisher(target)
    pub.publish(wanted({0: R(1, 2)}))
    reads: list[Path] = []
    real_read = publisher.read_regular_file
    monkeypatch.setattr(
        publisher, "read_regular_file", lambda path: reads.append(path) or real_read(path)
    )
    # under the lock only: the last document lacked it
    assert pub.publish(wanted({0: R(3, 0)})).wrote
    assert len(reads) == 1
    assert not pub.publish(wanted({0: R(3, 0)})).wrote  # without the lock
    assert len(reads) == 2


def test_a_write_due_by_the_last_document_is_checked_again_under_the_lock(
    target: Path,
) -> None:
    pub = OverridesPublisher(target)
    pub.publish(wanted({0: R(1, 2)}))
    # Another writer publishes what we are about to, after our last look.
    other = "devices:\n  '0':\n    memory: {free_bytes: 0, used_bytes: 3}\nversion: 1\n"
    tmp = target.with_name("other.tmp")
    tmp.write_text(other)
    tmp.rename(target)
    before = target.stat()
    assert not pub.publish(wanted({0: R(3, 0)})).wrote
    assert target.read_text() == other
    assert target.stat().st_ino == before.st_ino


def test_later_publish_wins(target: Path) -> None:
    pub = OverridesPublisher(target)
    pub.publish(wanted({0: R(9999, 1)}))
    pub.publish(wanted({0: R(0, 10000)}))
    assert parse_document(target.read_text())["devices"]["0"]["memory"] == {
        "used_bytes": 0,
        "free_bytes": 10000,
    }


def test_human_overrides_survive(target: Path) -> None:
    target.write_text(
        "all:\n  performance_state: P8\ndevices:\n  '0':\n    thermal:\n"
        "      temperature_gpu_c: 85\nversion: 1\n"
    )
    OverridesPublisher(target).publish(wanted({0: R(4096, 8192)}))
    doc = parse_document(target.read_text())
    assert doc["all"] == {"performance_state": "P8"}
    assert doc["devices"]["0"]["thermal"] == {"temperature_gpu_c": 85}
    assert doc["devices"]["0"]["memory"] == {"used_bytes": 4096, "free_bytes": 8192}


def test_devices_sharing_one_yaml_anchor_get_their_own_readings(target: Path) -> None:
    # A human may alias buckets; each device must still show its own numbers.
    target.write_text(
        "devices:\n  '0': &gpu\n    thermal: {temperature_gpu_c: 85}\n  '1': *gpu\nversion: 1\n"
    )
    OverridesPublisher(target).publish(wanted({0: R(1, 2), 1: R(3, 4)}))
    text = target.read_text()
    devices = parse_document(text)["devices"]
    thermal = {"temperature_gpu_c": 85}
    assert devices["0"] == {"thermal": thermal, "memory": {"used_bytes": 1, "free_bytes": 2}}
    assert devices["1"] == {"thermal": thermal, "memory": {"used_bytes": 3, "free_bytes": 4}}
    assert "&" not in text and "*" not in text


def test_deleted_file_is_restored(target: Path) -> None:
    pub = OverridesPublisher(target)
    pub.publish(wanted({0: R(1, 2)}))
    target.unlink()
    assert pub.publish(wanted({0: R(1, 2)})).wrote
    assert parse_document(target.read_text())["devices"]["0"]["memory"]["used_bytes"] == 1


def test_external_edit_of_our_keys_is_corrected(target: Path) -> None:
    pub = OverridesPublisher(target)
    pub.publish(wanted({0: R(1, 2)}))
    target.write_text("devices: {'0': {memory: {used_bytes: 5, free_bytes: 5}}}\nversion: 1\n")
    assert pub.publish(wanted({0: R(1, 2)})).wrote


@pytest.mark.parametrize(
    "bad",
    [
        "owner: me\n",
        "version: '1'\n",
        "a: 1\na: 2\n",
        "devices: &d {'0': *d}\n",
        "all: {fan: {count: !!int two}}\n",
        # deep enough to break the YAML emitter (about 330 levels)
        "all: {k: " + "[" * 340 + "]" * 340 + "}\n",
        "%YAML 1.2\n---\nversion: 1\n",
    ],
)
def test_refused_document_is_never_overwritten(target: Path, bad: str) -> None:
    target.write_text(bad)
    before = target.stat()
    with pytest.raises(PublishError, match="leaving it untouched"):
        OverridesPublisher(target).publish(wanted({0: R(1, 2)}))
    assert target.read_text() == bad
    assert target.stat().st_mtime_ns == before.st_mtime_ns


def test_nesting_is_bounded_below_what_the_emitter_can_write(target: Path) -> None:
    def nested(lists: int) -> str:  # root, `all` and the lists: lists + 2 levels
        return "all: {k: " + "[" * lists + "]" * lists + "}\n"

    with pytest.raises(DocumentError, match="over 100 levels"):
        parse_document(nested(99))
    target.write_text(nested(98))
    assert OverridesPublisher(target).publish(wanted({0: R(1, 2)})).wrote
    assert parse_document(target.read_text())["all"] == parse_document(nested(98))["all"]


@pytest.mark.timing
def test_a_fifo_is_refused_without_blocking(target: Path) -> None:
    # opening a FIFO for reading would wait for a writer, past any shutdown
    os.mkfifo(target)
    errors: list[str] = []

    def publish() -> None:
        try:
            OverridesPublisher(target).publish(wanted({0: R(1, 2)}))
        except PublishError as exc:
            errors.append(str(exc))

    attempt = threading.Thread(target=publish, daemon=True)
    attempt.start()
    attempt.join(timeout=5)
    if attempt.is_alive():
        os.close(os.open(target, os.O_WRONLY | os.O_NONBLOCK))  # let the reader go
        pytest.fail("publish blocked opening the FIFO")
    assert len(errors) == 1 and "not a regular file" in errors[0]
    assert stat.S_ISFIFO(target.stat().st_mode)


def test_missing_directory_is_not_created(tmp_path: Path) -> None:
    target = tmp_path / "driver" / "config" / "overrides.yaml"
    with pytest.raises(PublishError, match="does not exist"):
        OverridesPublisher(target).publish(wanted({0: R(1, 2)}))
    assert not (tmp_path / "driver").exists()


def test_same_size_change_gets_a_later_mtime(target: Path) -> None:
    pub = OverridesPublisher(target)
    pub.publish(wanted({0: R(1, 8)}))
    future = target.stat().st_mtime_ns + 10**10  # as if written within one tick
    os.utime(target, ns=(future, future))
    pub.publish(wanted({0: R(2, 7)}))
    after = target.stat()
    assert after.st_mtime_ns > future  # the engine sees mtime differ even at equal size


def test_remove_readings_removes_only_our_keys(target: Path) -> None:
    target.write_text("devices: {'0': {thermal: {t: 1}}}\nversion: 1\n")
    pub = OverridesPublisher(target)
    pub.publish(wanted({0: R(1, 2), 1: R(3, 4)}))
    assert pub.publish(withdrawal([0, 1])).wrote
    assert parse_document(target.read_text()) == {
        "version": 1,
        "devices": {"0": {"thermal": {"t": 1}}},
    }
    assert target.with_name("overrides.yaml.lock").exists()


def test_remove_readings_on_missing_file_creates_nothing(target: Path) -> None:
    assert not OverridesPublisher(target).publish(withdrawal([0])).wrote
    assert not target.exists()


def test_publish_drops_devices_gone_from_the_profile(target: Path) -> None:
    pub = OverridesPublisher(target)
    pub.publish(wanted({0: R(1, 2), 1: R(3, 4)}))
    pub.publish(wanted({0: R(1, 2)}, remove=[1]))
    assert set(parse_document(target.read_text())["devices"]) == {"0"}


def test_a_file_over_the_size_bound_is_refused_unread(
    target: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target.write_text("# padding\n" * 110_000)  # valid YAML, a little over 1 MiB
    parses: list[str] = []
    monkeypatch.setattr(publisher, "parse_document", lambda text: parses.append(text) or {})
    with pytest.raises(PublishError) as refused:
        OverridesPublisher(target).publish(wanted({0: R(1, 2)}))
    assert "1100000 bytes, over allocwatch's bound of 1048576 bytes (1 MiB)" in str(refused.value)
    assert parses == []
    assert target.read_text() == "# padding\n" * 110_000


def test_a_refused_document_is_not_parsed_again_until_it_changes(
    target: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target.write_text("all: {k: [" + ", ".join(["1"] * 20_001) + "]}\n")
    parses: list[str] = []
    real_parse = publisher.parse_document
    monkeypatch.setattr(
        publisher, "parse_document", lambda text: parses.append(text) or real_parse(text)
    )
    pub = OverridesPublisher(target)
    for _ in range(3):
        with pytest.raises(PublishError, match="more than 20000 nodes"):
            pub.publish(wanted({0: R(1, 2)}))
    assert len(parses) == 1
    # The same text written anew (a new inode): read again, and refused again.
    target.with_name("new").write_text(target.read_text())
    os.rename(target.with_name("new"), target)
    with pytest.raises(PublishError, match="more than 20000 nodes"):
        pub.publish(wanted({0: R(1, 2)}))
    assert len(parses) == 2
    target.write_text("all: {k: 1}\n")  # fixed
    assert pub.publish(wanted({0: R(1, 2)})).wrote
    assert parse_document(target.read_text())["all"] == {"k": 1}


def test_a_document_that_would_be_written_over_the_size_bound_is_left_alone(
    target: Path,
) -> None:
    """Flow style is compact; rendered in block style the same list outgrows the bound."""
    original = "all: {k: [" + ",".join(["1"] * 19_000) + "], blob: '" + "x" * 1_000_000 + "'}\n"
    target.write_text(original)
    pub = OverridesPublisher(target)
    renders = []
    real_render = pub.render
    pub.render = lambda doc: renders.append(1) or real_render(doc)  # type: ignore[method-assign]
    for _ in range(3):  # and not rendered again, every poll, until the file changes
        with pytest.raises(PublishError, match=r"would be .* bytes, over allocwatch's bound"):
            pub.publish(wanted({0: R(1, 2)}))
    assert len(renders) == 1
    assert target.read_text() == original


# ---- the `processes` key ------------------------------------------------------

PROC = {"pid": 123456789, "type": "C", "name": "ml/a/main", "used_memory_mib": 1}
HUMAN = [{"pid": 42, "type": "G", "name": "Xorg", "used_memory_mib": 5}]


def test_processes_are_published_beside_the_readings_and_written_once(target: Path) -> None:
    pub = OverridesPublisher(target)
    assert pub.publish(wanted({0: R(1, 2), 1: R(0, 3)}, processes={0: [PROC]})).wrote
    devices = parse_document(target.read_text())["devices"]
    assert devices["0"]["processes"] == [PROC]
    assert "processes" not in devices["1"]
    st = target.stat()
    for _ in range(20):
        assert not pub.publish(wanted({0: R(1, 2), 1: R(0, 3)}, processes={0: [PROC]})).wrote
    assert (target.stat().st_ino, target.stat().st_mtime_ns) == (st.st_ino, st.st_mtime_ns)


def test_a_device_without_claims_loses_our_key_and_shows_the_profiles_list(target: Path) -> None:
    pub = OverridesPublisher(target)
    assert pub.publish(wanted({0: R(1, 2)}, processes={0: [PROC]})).wrote
    assert pub.publish(wanted({0: R(0, 3)}, processes={})).wrote
    assert "processes" not in parse_document(target.read_text())["devices"]["0"]
    assert not pub.publish(wanted({0: R(0, 3)}, processes={})).wrote


def test_the_key_is_ours_on_every_device_published(target: Path) -> None:
    # A list someone set on a published device is replaced, or removed when it is idle.
    target.write_text(
        yaml.safe_dump({"devices": {"0": {"processes": HUMAN}, "1": {"processes": HUMAN}}})
    )
    pub = OverridesPublisher(target)
    assert pub.publish(wanted({0: R(1, 2), 1: R(0, 3)}, processes={0: [PROC]})).wrote
    devices = parse_document(target.read_text())["devices"]
    assert devices["0"]["processes"] == [PROC]
    assert devices["1"] == {"memory": {"used_bytes": 0, "free_bytes": 3}}


def test_opted_out_the_key_is_never_touched(target: Path) -> None:
    target.write_text(yaml.safe_dump({"devices": {"0": {"processes": HUMAN}}}))
    pub = OverridesPublisher(target)
    assert pub.publish(wanted({0: R(1, 2)}, processes=None)).wrote
    assert parse_document(target.read_text())["devices"]["0"]["processes"] == HUMAN
    assert pub.publish(withdrawal([0], processes=False)).wrote
    assert parse_document(target.read_text()) == {
        "version": 1,
        "devices": {"0": {"processes": HUMAN}},
    }


def test_a_wiped_file_gets_its_processes_back(target: Path) -> None:
    pub = OverridesPublisher(target)
    assert pub.publish(wanted({0: R(1, 2)}, processes={0: [PROC]})).wrote
    target.unlink()
    assert pub.publish(wanted({0: R(1, 2)}, processes={0: [PROC]})).wrote
    assert parse_document(target.read_text())["devices"]["0"]["processes"] == [PROC]


def test_a_changed_process_list_alone_is_written(target: Path) -> None:
    pub = OverridesPublisher(target)
    assert pub.publish(wanted({0: R(1, 2)}, processes={0: [PROC]})).wrote
    renamed = {**PROC, "name": "ml/b/main"}
    assert pub.publish(wanted({0: R(1, 2)}, processes={0: [renamed]})).wrote
    assert parse_document(target.read_text())["devices"]["0"]["processes"] == [renamed]


def test_removal_on_exit_takes_our_processes_with_the_readings(target: Path) -> None:
    target.write_text("devices: {'0': {thermal: {t: 1}}}\n")
    pub = OverridesPublisher(target)
    assert pub.publish(wanted({0: R(1, 2), 1: R(1, 2)}, processes={0: [PROC], 1: [PROC]})).wrote
    assert pub.publish(withdrawal([0, 1], processes=True)).wrote
    assert parse_document(target.read_text()) == {
        "version": 1,
        "devices": {"0": {"thermal": {"t": 1}}},
    }


def test_a_device_gone_from_the_profile_loses_its_processes(target: Path) -> None:
    pub = OverridesPublisher(target)
    assert pub.publish(wanted({0: R(1, 2), 1: R(1, 2)}, processes={0: [PROC], 1: [PROC]})).wrote
    assert pub.publish(wanted({0: R(1, 2)}, remove=[1], processes={0: [PROC]})).wrote
    assert "1" not in parse_document(target.read_text())["devices"]
