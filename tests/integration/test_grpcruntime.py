"""Timer slack: set for a block and the threads it starts; grpc's threads start with it."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from allocwatch.grpcruntime import GRPC_TIMER_SLACK_NS, timer_slack
from tests.support import REPO_ROOT

pytestmark = pytest.mark.timing

SLACK = 7_000_000


def slack_of(tid: int) -> int:
    """The kernel's record, not prctl's: what timer_slack is tested against."""
    return int(Path(f"/proc/{tid}/timerslack_ns").read_text())


def slack_of_a_thread_started_now() -> int:
    seen: list[int] = []
    thread = threading.Thread(target=lambda: seen.append(slack_of(threading.get_native_id())))
    thread.start()
    thread.join()
    return seen[0]


def test_the_block_and_threads_it_starts_get_the_slack_and_the_caller_its_own_back() -> None:
    own = threading.get_native_id()
    before = slack_of(own)
    assert before != SLACK
    with timer_slack(SLACK):
        inside = slack_of(own)
        started_inside = slack_of_a_thread_started_now()
    assert inside == started_inside == SLACK
    assert slack_of(own) == before
    assert slack_of_a_thread_started_now() == before


def test_the_callers_slack_comes_back_when_the_block_raises() -> None:
    own = threading.get_native_id()
    before = slack_of(own)
    with pytest.raises(RuntimeError), timer_slack(2 * SLACK):
        assert slack_of(own) == 2 * SLACK != before
        raise RuntimeError("in the block")
    assert slack_of(own) == before


def in_a_fresh_interpreter(script: str, socket_path: Path) -> Any:
    """What `script`, run with the socket path as its argument, prints as JSON."""
    run = subprocess.run(
        [sys.executable, "-c", script, str(socket_path)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(run.stdout)


# In a fresh interpreter, so that this channel is the one that starts grpc.
_OPEN_A_CHANNEL = """
import json, os, sys, threading, time
from pathlib import Path
from allocwatch.grpcruntime import open_channel

def slack(tid):
    return int(Path(f"/proc/{tid}/timerslack_ns").read_text())

tasks = Path("/proc/self/task")
before = set(os.listdir(tasks))
own = threading.get_native_id()
own_before = slack(own)
channel = open_channel(sys.argv[1])  # no server needed: the channel starts grpc's threads
new = set(os.listdir(tasks)) - before
# A thread names itself once it runs, which on a busy machine can be a while.
deadline = time.monotonic() + 5
while time.monotonic() < deadline:
    started = {t: [(tasks / t / "comm").read_text().strip(), slack(t)] for t in new}
    if "event_engine" in {name for name, _ in started.values()}:
        break
    time.sleep(0.01)
print(json.dumps({"own": [own_before, slack(own)], "started": started}))
channel.close()
"""


def test_grpcs_threads_start_with_the_slack_and_the_caller_keeps_its_own(
    short_tmp: Path,
) -> None:
    seen = in_a_fresh_interpreter(_OPEN_A_CHANNEL, short_tmp / "kubelet.sock")
    own_before, own_after = seen["own"]
    assert own_after == own_before != GRPC_TIMER_SLACK_NS
    started = seen["started"].values()
    assert "event_engine" in {name for name, _ in started}, started
    assert {slack for _, slack in started} == {GRPC_TIMER_SLACK_NS}, started


# In a fresh interpreter: the throwaway is made only before the process's first channel.
# Its threads are given time to exit whatever the machine's load: how soon
# they do is a matter of speed, and a late one is reused, by design.
_OPEN_TWO_CHANNELS = """
import json, os, sys, threading
from pathlib import Path
import grpc
from allocwatch import grpcruntime
from allocwatch.grpcruntime import open_channel

grpcruntime.THROWAWAY_EXIT_SECONDS = 30

own = threading.get_native_id()
tasks = Path("/proc/self/task")
made = []
real_insecure_channel = grpc.insecure_channel

def recording_insecure_channel(target, options=None):
    slack = int(Path(f"/proc/{own}/timerslack_ns").read_text())
    made.append({"slack": slack, "threads": len(os.listdir(tasks))})
    return real_insecure_channel(target, options=options)

grpc.insecure_channel = recording_insecure_channel
before = len(os.listdir(tasks))
first = open_channel(sys.argv[1])
second = open_channel(sys.argv[1])
print(json.dumps({"before": before, "made": made}))
first.close()
second.close()
"""


def test_the_first_channel_is_preceded_by_a_throwaway_at_normal_slack(short_tmp: Path) -> None:
    """grpc's one-time clock measurement runs on the throwaway's threads, not the slack's."""
    seen = in_a_fresh_interpreter(_OPEN_TWO_CHANNELS, short_tmp / "kubelet.sock")
    throwaway, first, second = seen["made"]
    assert throwaway["slack"] != GRPC_TIMER_SLACK_NS
    assert first["slack"] == second["slack"] == GRPC_TIMER_SLACK_NS
    # The throwaway's threads had exited, so the first channel's are new ones.
    assert throwaway["threads"] == first["threads"] == seen["before"]
