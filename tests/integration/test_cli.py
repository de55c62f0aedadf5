"""The `allocwatch` command end to end, as a subprocess."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from allocwatch import cli, flags
from allocwatch.document import parse_document
from allocwatch.shutdown import STOP_SIGNALS
from devtools.podresources import FakePodResourcesLister, dra_pod, dra_resource, gpu_pod
from devtools.waiting import wait_until
from tests.conftest import A100_APERTURE, A100_HALF, A100_UUIDS
from tests.support import REPO_ROOT, START_SECONDS
from tests.support.lockholder import hold_lock, release
from tests.support.rig import memory
from tests.support.runqueue import run_timed, time_to_exit

pytestmark = pytest.mark.timing

CMD = [sys.executable, "-m", "allocwatch"]

# Watchers started by the running test; its teardown kills any still running,
# so a failed test does not leave one polling for good.
_started: list[subprocess.Popen[str]] = []


def spawn(*args: str, **popen: Any) -> subprocess.Popen[str]:
    """`allocwatch <args>` in the background, stderr piped, killed after the test if need be.

    With faulthandler on, so that exit_code_within() can show where one that
    did not exit was."""
    env = {**popen.pop("env", os.environ), "PYTHONFAULTHANDLER": "1"}
    proc = subprocess.Popen(
        [*CMD, *args], stderr=subprocess.PIPE, text=True, cwd=REPO_ROOT, env=env, **popen
    )
    _started.append(proc)
    return proc


def exit_code_within(proc: subprocess.Popen[str], timeout: float) -> int:
    """The exit code; a watcher still running after `timeout` fails the test with
    every thread's stack (faulthandler, on SIGABRT) and what it logged."""
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)
        _, err = proc.communicate(timeout=10)
        pytest.fail(f"still running {timeout:g}s after the signal:\n{err}")


@pytest.fixture(autouse=True)
def no_watcher_outlives_its_test() -> Iterator[None]:
    yield
    while _started:
        proc = _started.pop()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def run(*args: str, env: dict[str, str] | None = None, timeout: float = START_SECONDS):
    # A guard against a hang over the process's whole life, its start included.
    return subprocess.run(
        [*CMD, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO_ROOT,
        env={**os.environ, **(env or {})},
    )


def test_version() -> None:
    out = run("--version")
    assert out.returncode == 0 and re.fullmatch(r"allocwatch \d+\.\d+\.\d+\S*\n", out.stdout)


@pytest.mark.parametrize(
    ("preset", "expected"),
    [
        (None, "-event_engine_client"),
        ("", ""),
        ("-event_engine_listener", "-event_engine_listener"),
    ],
)
def test_grpc_experiments_default_leaves_a_users_setting_alone(
    preset: str | None, expected: str
) -> None:
    env = {k: v for k, v in os.environ.items() if k != "GRPC_EXPERIMENTS"}
    if preset is not None:
        env["GRPC_EXPERIMENTS"] = preset
    # grpc reads the variable once, on import: the package must set it first.
    code = (
        "import os, sys, allocwatch; imported = 'grpc' in sys.modules; "
        "import allocwatch.cli; print(imported, repr(os.environ['GRPC_EXPERIMENTS']))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, env=env
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout == f"False {expected!r}\n"


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--used-fraction", "nan"], "--used-fraction"),
        (["--used-fraction", "0"], "--used-fraction"),
        (["--used-fraction", "1.5"], "--used-fraction"),
        (["--used-fraction", "inf"], "--used-fraction"),
        (["--interval", "2x"], "--interval"),
        (["--interval", "0s"], "--interval"),
        (["--interval", "1ns"], "between 10ms and 24h"),
        (["--interval", "9999999h"], "between 10ms and 24h"),
        (["--dial-timeout", "-1s"], "--dial-timeout"),
        (["--metrics-address", "nonsense"], "--metrics-address"),
        (["--log-format", "xml"], "--log-format"),
        (["--resource-name", "gpu"], "--resource-name"),
        (["--resource-name", "nvidia.com/"], "--resource-name"),
        (["--dra-driver", ""], "--dra-driver"),
        (["--dra-driver", "nvidia.com/gpu"], "--dra-driver"),
        (["--socket", ""], "--socket"),
        (["--no-such-flag"], "unrecognized"),
        (["--interv", "1s"], "unrecognized arguments: --interv"),
        (["--used-frac", "0.5"], "unrecognized arguments: --used-frac"),
        (["--used-fraction", "1_0"], "--used-fraction"),
        (["--used-fraction", "0_5"], "--used-fraction"),
        (["--used-fraction", " 0.5"], "--used-fraction"),
        (["--used-fraction", "\u0660.5"], "--used-fraction"),
        (["--interval", "1_0s"], "--interval"),
        (["--metrics-address", ":9_477"], "--metrics-address"),
        (["--metrics-address", ": 9477"], "--metrics-address"),
    ],
)
def test_bad_flags_exit_2_naming_the_flag(args: list[str], needle: str) -> None:
    out = run(*args)
    assert out.returncode == 2
    assert needle in out.stderr


def test_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("MOCK_NVML_PODRESOURCES_SOCKET", "MOCK_NVML_CONFIG", "MOCK_NVML_OVERRIDES"):
        monkeypatch.delenv(name, raising=False)
    args = flags.build_parser().parse_args([])
    assert args.socket == "/var/lib/kubelet/pod-resources/kubelet.sock"
    assert args.driver_root == "/var/lib/nvml-mock/driver"
    assert args.config is None and args.overrides is None  # under the driver root
    assert args.interval == 0.5
    assert args.used_fraction == 0.5
    assert args.resource_names is None  # nvidia.com/gpu and nvidia.com/gpu.shared
    assert args.dra_drivers is None  # gpu.nvidia.com
    assert args.dial_timeout == 10.0
    assert args.metrics_address == ":9477"
    assert (args.log_format, args.log_level) == ("text", "info")
    assert not args.keep_readings_on_exit and not args.once
    assert args.processes  # claims are published as NVML processes unless --no-processes


def test_a_metrics_port_in_use_exits_1_naming_the_flag(
    kubelet: FakePodResourcesLister, driver_root: Path
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        out = run(
            "--socket", kubelet.socket_path, "--driver-root", str(driver_root),
            "--metrics-address", address,
        )  # fmt: skip
    assert out.returncode == 1
    assert f"--metrics-address {address}: " in out.stderr and "in use" in out.stderr
    assert not (driver_root / "config" / "overrides.yaml").exists()


def test_a_crashed_loop_still_removes_its_readings(
    kubelet: FakePodResourcesLister, driver_root: Path
) -> None:
    crash_after_one_poll = (
        "import sys, allocwatch.watch as watch\n"
        "def run(self, stop):\n"
        "    self.poll(stop)\n"
        "    raise RuntimeError('the loop crashed')\n"
        "watch.Watcher.run = run\n"
        "from allocwatch.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", crash_after_one_poll, "--socket", kubelet.socket_path,
         "--driver-root", str(driver_root), "--metrics-address", ""],
        capture_output=True, text=True, timeout=START_SECONDS, cwd=REPO_ROOT,
    )  # fmt: skip
    assert out.returncode == 1 and "the loop crashed" in out.stderr
    assert "removed memory readings" in out.stderr  # so there had been some
    assert memory(driver_root / "config" / "overrides.yaml") == {}


def _listening_without_grpc(path: Path) -> socket.socket:
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    listener.listen()
    return listener


def _refusing(path: Path) -> None:
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(path))  # bound, never listening: connect is refused


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda p: None, "it does not exist"),
        (lambda p: p.mkdir(), "it is not a socket"),
        (lambda p: p.write_text(""), "it is not a socket"),
        (_refusing, "connecting to it fails: Connection refused"),
        (_listening_without_grpc, "it accepts connections, but no gRPC server answered"),
    ],
    ids=["absent", "directory", "file", "refused", "not-grpc"],
)
def test_unreachable_socket_exits_1_after_dial_timeout_saying_why(
    short_tmp: Path, driver_root: Path, make: Callable[[Path], object], reason: str
) -> None:
    path = short_tmp / "k.sock"
    keep = make(path)
    # Its whole life, timed less its waits for a CPU: an interpreter's start,
    # grpc's import, the dial, the exit; well under 10 s when the 300 ms holds.
    out, took = run_timed(
        [*CMD, "--socket", str(path), "--driver-root", str(driver_root),
         "--dial-timeout", "300ms", "--metrics-address", ""],
        cwd=REPO_ROOT,
    )  # fmt: skip
    assert out.returncode == 1
    assert f"--socket {path}: kubelet pod-resources socket not reachable within 300ms" in out.stderr
    assert reason in out.stderr, out.stderr
    assert took < 10, f"ran {took:.2f}s"
    if isinstance(keep, socket.socket):
        keep.close()


def test_once_publishes_and_exits_0(kubelet: FakePodResourcesLister, driver_root: Path) -> None:
    kubelet.set_pods([gpu_pod("ml", "trainer", [A100_UUIDS[1] + "::0"])])
    out = run("--once", "--socket", kubelet.socket_path, "--driver-root", str(driver_root))
    assert out.returncode == 0, out.stderr
    mem = memory(driver_root / "config" / "overrides.yaml")
    assert mem["1"] == {"used_bytes": A100_HALF, "free_bytes": A100_APERTURE - A100_HALF}
    assert mem["0"] == {"used_bytes": 0, "free_bytes": A100_APERTURE}
    assert "device 1 (" in out.stderr  # one line per change


def test_dra_drivers_are_counted_and_named_at_startup(
    kubelet: FakePodResourcesLister, driver_root: Path
) -> None:
    kubelet.set_pods(
        [
            dra_pod("ml", "a", "c1", [dra_resource("gpu-2")]),
            dra_pod("ml", "b", "c2", [dra_resource("gpu-3", driver="gpu.example.com")]),
        ]
    )
    common = ("--once", "--socket", kubelet.socket_path, "--driver-root", str(driver_root))
    out = run(*common)
    assert out.returncode == 0, out.stderr
    assert "DRA drivers gpu.nvidia.com," in out.stderr
    mem = memory(driver_root / "config" / "overrides.yaml")
    assert mem["2"]["used_bytes"] == A100_HALF
    assert mem["3"]["used_bytes"] == 0

    out = run(*common, "--dra-driver", "gpu.example.com", "--dra-driver", "gpu.nvidia.com")
    assert out.returncode == 0, out.stderr
    assert "DRA drivers gpu.example.com, gpu.nvidia.com," in out.stderr
    mem = memory(driver_root / "config" / "overrides.yaml")
    assert mem["2"]["used_bytes"] == mem["3"]["used_bytes"] == A100_HALF


def test_once_with_env_fallbacks_and_fraction(
    kubelet: FakePodResourcesLister, driver_root: Path, tmp_path: Path
) -> None:
    kubelet.set_pods([gpu_pod("ml", "t", [A100_UUIDS[0]])])
    target = driver_root / "config" / "elsewhere.yaml"
    out = run(
        "--once",
        "--used-fraction",
        "0.25",
        env={
            "MOCK_NVML_PODRESOURCES_SOCKET": kubelet.socket_path,
            "MOCK_NVML_CONFIG": str(driver_root / "config" / "config.yaml"),
            "MOCK_NVML_OVERRIDES": str(target),
        },
    )
    assert out.returncode == 0, out.stderr
    assert memory(target)["0"]["used_bytes"] == 10584588288


def test_an_explicit_driver_root_beats_the_env_and_says_so(
    kubelet: FakePodResourcesLister, driver_root: Path
) -> None:
    kubelet.set_pods([gpu_pod("ml", "t", [A100_UUIDS[0]])])
    elsewhere = driver_root / "config" / "elsewhere.yaml"
    out = run(
        "--once",
        "--socket",
        kubelet.socket_path,
        "--driver-root",
        str(driver_root),
        env={"MOCK_NVML_OVERRIDES": str(elsewhere), "MOCK_NVML_CONFIG": "/absent/config.yaml"},
    )
    assert out.returncode == 0, out.stderr
    assert memory(driver_root / "config" / "overrides.yaml")["0"]["used_bytes"] == A100_HALF
    assert not elsewhere.exists()
    assert f"MOCK_NVML_OVERRIDES={elsewhere} ignored: --driver-root {driver_root}" in out.stderr
    assert "MOCK_NVML_CONFIG=/absent/config.yaml ignored" in out.stderr


def test_once_fails_with_1_when_list_fails(
    kubelet: FakePodResourcesLister, driver_root: Path
) -> None:
    kubelet.set_failure("UNAVAILABLE")
    out = run("--once", "--socket", kubelet.socket_path, "--driver-root", str(driver_root))
    assert out.returncode == 1
    assert "UNAVAILABLE" in out.stderr
    assert not (driver_root / "config" / "overrides.yaml").exists()


def test_text_logs_keep_a_multi_line_error_on_one_line(
    kubelet: FakePodResourcesLister, driver_root: Path
) -> None:
    (driver_root / "config" / "overrides.yaml").write_text("devices: {'0': {memory: [\n")
    out = run("--once", "--socket", kubelet.socket_path, "--driver-root", str(driver_root))
    assert out.returncode == 1
    assert "not valid YAML" in out.stderr
    lines = out.stderr.splitlines()
    assert all(re.match(r"\d{4}-\d\d-\d\dT\S+Z [A-Z]+ ", line) for line in lines), lines


def test_an_interval_that_takes_much_of_the_kubelets_budget_is_warned_about(
    kubelet: FakePodResourcesLister, driver_root: Path
) -> None:
    args = ("--once", "--socket", kubelet.socket_path, "--driver-root", str(driver_root))
    fast = run(*args, "--interval", "50ms")
    assert fast.returncode == 0
    assert "--interval 50ms: 20 List calls a second, of the kubelet's 100" in fast.stderr
    assert "List calls a second" not in run(*args, "--interval", "100ms").stderr


def test_once_fails_with_1_without_profile(kubelet: FakePodResourcesLister, tmp_path: Path) -> None:
    out = run("--once", "--socket", kubelet.socket_path, "--driver-root", str(tmp_path / "none"))
    assert out.returncode == 1
    assert "missing" in out.stderr and str(tmp_path / "none") in out.stderr
    assert not (tmp_path / "none").exists()


def _catches(pid: int, sig: signal.Signals) -> bool:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) >> (sig - 1) & 1)
    return False


# `allocwatch`, held as it starts to import grpc until a signal comes: a
# signal at that point must already meet the watcher's first handlers.
HOLD_GRPC = """
import importlib.abc, runpy, signal, sys

class HoldGrpc(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "grpc":
            print("importing grpc", flush=True)
            signal.pause()
        return None

sys.meta_path.insert(0, HoldGrpc())
runpy.run_module("allocwatch", run_name="__main__")
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_signal_while_grpc_is_still_loading_exits_0(
    short_tmp: Path, driver_root: Path, sig: signal.Signals
) -> None:
    # Held there, not caught there by polling: how long grpc takes to load
    # against how soon this test looks is a matter of speed.
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD_GRPC, "--socket", str(short_tmp / "absent.sock"),
         "--driver-root", str(driver_root), "--metrics-address", ""],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO_ROOT,
    )  # fmt: skip
    _started.append(proc)
    assert proc.stdout is not None
    assert proc.stdout.readline() == "importing grpc\n"
    # Every stop signal is caught before grpc (its cygrpc module) is even loaded.
    assert all(_catches(proc.pid, s) for s in STOP_SIGNALS)
    assert "cygrpc" not in Path(f"/proc/{proc.pid}/maps").read_text()
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    assert "Traceback" not in err


class Running:
    def __init__(self, *args: str) -> None:
        self.proc = spawn("--metrics-address", "127.0.0.1:0", "--interval", "50ms", *args)
        assert self.proc.stderr is not None
        self.port = 0
        self.log: list[str] = []
        for line in self.proc.stderr:
            self.log.append(line)
            m = re.search(r"on port (\d+)", line)
            if m:
                self.port = int(m.group(1))
                break
        assert self.port, "".join(self.log)

    def get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=5) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    def terminate(self) -> tuple[int, float, str]:
        """SIGTERM: the exit code, the seconds to exit (less waits for a CPU), the log."""
        try:
            took = time_to_exit(self.proc, signal.SIGTERM)
        except AssertionError:  # still running: fail with where it was
            exit_code_within(self.proc, 0)
            raise
        code = self.proc.wait(timeout=10)
        assert self.proc.stderr is not None
        return code, took, "".join(self.log) + self.proc.stderr.read()


def test_loop_sigterm_exits_0_quickly_and_removes_readings(
    kubelet: FakePodResourcesLister, driver_root: Path
) -> None:
    target = driver_root / "config" / "overrides.yaml"
    target.write_text("devices: {'2': {thermal: {temperature_gpu_c: 85}}}\n")
    kubelet.set_pods([gpu_pod("ml", "t", [A100_UUIDS[2]])])
    w = Running("--socket", kubelet.socket_path, "--driver-root", str(driver_root))
    wait_until(
        lambda: memory(target).get("2", {}).get("used_bytes") == A100_HALF,
        what="the claim published",
    )
    wait_until(lambda: w.get("/readyz")[0] == 200, what="ready")
    assert w.get("/healthz") == (200, "ok\n")
    status, body = w.get("/metrics")
    assert status == 200
    assert (
        f'allocwatch_device_used_bytes{{index="2",uuid="{A100_UUIDS[2]}"}} 2.1169176576e+10' in body
    )
    assert 'allocwatch_polls_total{result="ok"}' in body
    assert "allocwatch_poll_duration_seconds_bucket" in body
    code, took, log = w.terminate()
    assert code == 0
    assert took < 1.0, f"shutdown took {took:.2f}s"
    assert parse_document(target.read_text()) == {
        "version": 1,
        "devices": {"2": {"thermal": {"temperature_gpu_c": 85}}},
    }
    assert "removed memory readings" in log


def test_keep_readings_on_exit(kubelet: FakePodResourcesLister, driver_root: Path) -> None:
    target = driver_root / "config" / "overrides.yaml"
    w = Running(
        "--socket",
        kubelet.socket_path,
        "--driver-root",
        str(driver_root),
        "--keep-readings-on-exit",
        "--log-format",
        "json",
    )
    wait_until(target.exists, what="published")
    code, _, log = w.terminate()
    assert code == 0
    assert len(memory(target)) == 8
    assert '"level": "info"' in log


def test_not_ready_without_profile(kubelet: FakePodResourcesLister, tmp_path: Path) -> None:
    w = Running("--socket", kubelet.socket_path, "--driver-root", str(tmp_path / "absent"))
    wait_until(lambda: "missing" in w.get("/readyz")[1], what="a reason")
    assert w.get("/readyz")[0] == 503
    assert w.get("/healthz")[0] == 200
    code, _, log = w.terminate()
    assert code == 0
    # logged once, not once per poll, and naming the file
    assert log.count("is missing") == 1
    assert f"profile {tmp_path / 'absent' / 'config' / 'config.yaml'} is missing" in log
    assert " ERROR " not in log  # and not again by the watcher, without the path


# `allocwatch`, saying on stdout when its dial begins.
SAY_WHEN_DIALING = """
import runpy
from allocwatch import podresources

dial = podresources.PodResourcesClient.wait_ready

def wait_ready(self, timeout):
    print("dialing", flush=True)
    return dial(self, timeout)

podresources.PodResourcesClient.wait_ready = wait_ready
runpy.run_module("allocwatch", run_name="__main__")
"""


@pytest.mark.parametrize("listening", [False, True], ids=["absent", "not-grpc"])
def test_sigterm_during_dial_exits_0(short_tmp: Path, driver_root: Path, listening: bool) -> None:
    path = short_tmp / "k.sock"
    listener = _listening_without_grpc(path) if listening else None
    proc = subprocess.Popen(
        [sys.executable, "-c", SAY_WHEN_DIALING, "--socket", str(path),
         "--driver-root", str(driver_root), "--metrics-address", "", "--dial-timeout", "30s"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO_ROOT,
    )  # fmt: skip
    _started.append(proc)
    # In the dial, not still starting (a signal then is the early handler's):
    # for an absent socket the watcher says so; on a listening one it has connected.
    assert proc.stdout is not None
    assert proc.stdout.readline() == "dialing\n"
    if listener is not None:
        # Connected: the dial's call is in flight, waiting for an answer that never comes.
        listener.settimeout(30)
        conn, _ = listener.accept()
    took = time_to_exit(proc, signal.SIGTERM)
    assert proc.wait(timeout=5) == 0
    assert took < 1.0, f"shutdown took {took:.2f}s"
    if listener is not None:
        conn.close()
        listener.close()


def running_with_a_hung_list(
    kubelet: FakePodResourcesLister, driver_root: Path
) -> tuple[Running, Path]:
    """The watcher after its first publish, blocked in a List that will not answer."""
    w = Running("--socket", kubelet.socket_path, "--driver-root", str(driver_root))
    target = driver_root / "config" / "overrides.yaml"
    wait_until(target.exists, what="first publish")
    kubelet.set_hang(30)
    # The kubelet counts a List before it reads its state: one counted after
    # this read began after the hang was set, and hangs. The one in flight now
    # may hang too, and the next comes at its deadline (LIST_TIMEOUT).
    calls = kubelet.list_calls()
    wait_until(lambda: kubelet.list_calls() > calls, what="a List in flight")
    return w, target


def test_sigterm_during_a_hung_list_exits_within_a_second(
    kubelet: FakePodResourcesLister, driver_root: Path
) -> None:
    w, target = running_with_a_hung_list(kubelet, driver_root)
    code, took, log = w.terminate()
    assert code == 0
    assert took < 1.0, f"shutdown took {took:.2f}s"
    assert memory(target) == {}
    assert "cancelled" not in log  # abandoning a List for shutdown is not a failure


def test_sigterm_with_a_hung_list_and_the_lock_held_exits_within_a_second(
    kubelet: FakePodResourcesLister, driver_root: Path
) -> None:
    """The worst case: grpc notices the signal late and the cleanup cannot lock."""
    w, target = running_with_a_hung_list(kubelet, driver_root)
    holder = hold_lock(Path(f"{target}.lock"))
    try:
        code, took, log = w.terminate()
    finally:
        release(holder)
    assert code == cli.EXIT_READINGS_LEFT == 3  # the exit says the readings stayed
    assert took < 1.0, f"shutdown took {took:.2f}s"
    assert "could not remove readings" in log
    assert len(memory(target)) == 8  # left as they were, not half-removed


def test_sighup_exits_0_and_removes_readings(
    kubelet: FakePodResourcesLister, driver_root: Path
) -> None:
    w = Running("--socket", kubelet.socket_path, "--driver-root", str(driver_root))
    target = driver_root / "config" / "overrides.yaml"
    wait_until(target.exists, what="first publish")
    w.proc.send_signal(signal.SIGHUP)
    assert exit_code_within(w.proc, 5) == 0
    assert memory(target) == {}


def test_sigterm_during_a_hung_list_with_once_exits_0(
    kubelet: FakePodResourcesLister, driver_root: Path
) -> None:
    kubelet.set_hang(30)
    proc = spawn("--once", "--socket", kubelet.socket_path, "--driver-root", str(driver_root))
    # From the spawn: the watcher's start is in this wait, however long it takes.
    wait_until(lambda: kubelet.list_calls() >= 1, START_SECONDS, what="the List in flight")
    wait_until(lambda: _catches(proc.pid, signal.SIGTERM), what="the SIGTERM handler")
    took = time_to_exit(proc, signal.SIGTERM)
    _, err = proc.communicate(timeout=5)
    assert proc.returncode == 0, err
    assert took < 1.0, f"shutdown took {took:.2f}s"
    assert " ERROR " not in err


@pytest.mark.parametrize("delay_ms", [0, 5, 10, 20])
def test_a_signal_after_the_work_is_done_keeps_exit_0(
    kubelet: FakePodResourcesLister, driver_root: Path, delay_ms: int
) -> None:
    """Once main() has returned, Python resets its handlers while grpc cleans up."""
    proc = spawn("--once", "--socket", kubelet.socket_path, "--driver-root", str(driver_root))
    assert proc.stderr is not None
    for line in proc.stderr:  # the last line --once logs: device 7's reading
        if "device 7 " in line:
            break
    time.sleep(delay_ms / 1000)
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=10)
    assert proc.returncode == 0


def test_relative_socket_path(kubelet: FakePodResourcesLister, driver_root: Path) -> None:
    socket = Path(kubelet.socket_path)
    out = subprocess.run(
        [*CMD, "--once", "--socket", socket.name, "--driver-root", str(driver_root)],
        capture_output=True,
        text=True,
        timeout=START_SECONDS,
        cwd=socket.parent,
    )
    assert out.returncode == 0, out.stderr


def _processes(target: Path) -> dict[str, Any]:
    devices = parse_document(target.read_text()).get("devices", {})
    return {k: v["processes"] for k, v in devices.items() if "processes" in v}


def test_claims_are_processes_by_default_and_removed_on_sigterm(
    kubelet: FakePodResourcesLister, driver_root: Path
) -> None:
    target = driver_root / "config" / "overrides.yaml"
    kubelet.set_pods([gpu_pod("ml", "t", [A100_UUIDS[2]], container="app")])
    w = Running("--socket", kubelet.socket_path, "--driver-root", str(driver_root))
    wait_until(lambda: target.exists() and "2" in _processes(target), what="the process")
    [entry] = _processes(target)["2"]
    assert entry["name"] == "ml/t/app" and entry["type"] == "C"
    assert entry["used_memory_mib"] == A100_HALF // 2**20
    code, _, log = w.terminate()
    assert code == 0, log
    assert _processes(target) == {}


def test_no_processes_leaves_the_key_alone(
    kubelet: FakePodResourcesLister, driver_root: Path
) -> None:
    target = driver_root / "config" / "overrides.yaml"
    target.write_text("devices: {'2': {processes: [{pid: 9, name: mine, used_memory_mib: 1}]}}\n")
    kubelet.set_pods([gpu_pod("ml", "t", [A100_UUIDS[0]])])
    w = Running(
        "--socket", kubelet.socket_path, "--driver-root", str(driver_root), "--no-processes"
    )
    wait_until(lambda: "0" in memory(target), what="published")
    assert _processes(target) == {"2": [{"pid": 9, "name": "mine", "used_memory_mib": 1}]}
    code, _, log = w.terminate()
    assert code == 0, log
    assert _processes(target) == {"2": [{"pid": 9, "name": "mine", "used_memory_mib": 1}]}


def test_keep_readings_on_exit_keeps_the_processes(
    kubelet: FakePodResourcesLister, driver_root: Path
) -> None:
    target = driver_root / "config" / "overrides.yaml"
    kubelet.set_pods([gpu_pod("ml", "t", [A100_UUIDS[1]])])
    w = Running(
        "--socket",
        kubelet.socket_path,
        "--driver-root",
        str(driver_root),
        "--keep-readings-on-exit",
    )
    wait_until(lambda: target.exists() and "1" in _processes(target), what="the process")
    code, _, log = w.terminate()
    assert code == 0, log
    assert [p["name"] for p in _processes(target)["1"]] == ["ml/t/main"]
