"""The e2e framework's document helpers, and its node script that edits overrides.yaml."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from e2e.framework.expected import merged, without_readings
from e2e.framework.nodefiles import NODE_SCRIPTS

# A document as a real nvml-mock node might hold it: a user's overrides,
# nulls and empty maps included, beside allocwatch's readings.
FOUND = {
    "version": 1,
    "all": {"performance_state": "P2", "memory": {"used_bytes": 5}},
    "devices": {
        "0": {"memory": {"used_bytes": 1, "free_bytes": 2}},
        "1": {"memory": {"used_bytes": 3, "free_bytes": 4, "total_bytes": 9}, "ecc": {}},
        "2": {"thermal": {"temperature_gpu_c": 70}, "utilization": None},
        # a device allocwatch publishes nothing for (no memory in the profile)
        "5": {"memory": {"used_bytes": 9}},
    },
}
PUBLISHED = ["0", "1", "2", "3"]


def test_without_readings_takes_only_our_two_keys_and_what_they_leave_empty() -> None:
    assert without_readings(FOUND, PUBLISHED) == {
        "version": 1,
        "all": {"performance_state": "P2", "memory": {"used_bytes": 5}},  # not a device's
        "devices": {
            "1": {"memory": {"total_bytes": 9}, "ecc": {}},  # an empty map found is kept
            "2": {"thermal": {"temperature_gpu_c": 70}, "utilization": None},
            "5": {"memory": {"used_bytes": 9}},  # someone else's
        },
    }
    only_ours = {"version": 1, "devices": {"0": {"memory": {"used_bytes": 1}}}}
    assert without_readings(only_ours, PUBLISHED) == {"version": 1}
    assert without_readings(None, PUBLISHED) == {}


def test_merged_deep_merges_a_copy_and_null_deletes() -> None:
    base = {"all": {"a": 1, "b": 2}, "devices": {"0": {"x": 1}}}
    out = merged(base, {"all": {"b": None, "c": 3}, "devices": None, "version": 1})
    assert out == {"all": {"a": 1, "c": 3}, "version": 1}
    assert base == {"all": {"a": 1, "b": 2}, "devices": {"0": {"x": 1}}}


def change(path: Path, how: dict[str, Any]) -> Any:
    script = NODE_SCRIPTS / "patch_overrides.py"
    out = subprocess.run(
        [sys.executable, str(script), str(path), json.dumps(how)],
        check=True,
        capture_output=True,
        text=True,
        timeout=30,
    )
    doc = json.loads(out.stdout.strip().splitlines()[-1])["doc"]
    assert yaml.safe_load(path.read_text()) == doc
    return doc


def test_restoring_what_was_found_keeps_the_readings_of_now(tmp_path: Path) -> None:
    path = tmp_path / "overrides.yaml"
    path.write_text(yaml.safe_dump(FOUND))
    found = without_readings(FOUND, PUBLISHED)
    # A test's own keys, then the watcher's newer readings on other devices.
    change(path, {"merge": {"all": None, "devices": {"2": None, "3": {"thermal": {"x": 1}}}}})
    current = yaml.safe_load(path.read_text())
    current["devices"]["0"]["memory"] = {"used_bytes": 7, "free_bytes": 8}
    current["devices"]["3"]["memory"] = {"used_bytes": 0, "free_bytes": 6}
    path.write_text(yaml.safe_dump(current))

    expected = copy.deepcopy(FOUND)  # everything found, with the readings of now
    expected["devices"]["0"]["memory"] = {"used_bytes": 7, "free_bytes": 8}
    expected["devices"]["3"] = {"memory": {"used_bytes": 0, "free_bytes": 6}}
    assert change(path, {"replace": found}) == expected


def test_restoring_an_absent_file_leaves_only_readings(tmp_path: Path) -> None:
    path = tmp_path / "overrides.yaml"
    change(path, {"merge": {"devices": {"0": {"memory": {"used_bytes": 1, "free_bytes": 2}}}}})
    change(path, {"merge": {"all": {"performance_state": "P8"}}})
    assert change(path, {"replace": without_readings(None, PUBLISHED)}) == {
        "version": 1,
        "devices": {"0": {"memory": {"used_bytes": 1, "free_bytes": 2}}},
    }
