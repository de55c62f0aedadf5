"""A fake kubelet pod-resources server: a real gRPC server on a unix socket.

For the tests and the benchmarks; never shipped. Run it as its own process
(`python -m devtools.podresources --socket S --state F`); tests drive it through the
`FakePodResourcesLister` handle below. The server re-reads the JSON state file whenever
it changes, so a test changes what List returns by rewriting that file
atomically:

    {"pods": [gpu_pod(...), dra_pod(...)], "fail": null | "UNAVAILABLE",
     "hang_seconds": 0, "raw_pods_hex": []}

`raw_pods_hex` are pods sent as given, after the others: bytes no real
kubelet would send, to test a client against a malformed response.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc

from allocwatch.kubeletapi.podresources.v1 import api_pb2, api_pb2_grpc
from devtools.podresources.pods import build_response, dra_pod, dra_resource, gpu_pod

__all__ = [
    "FakePodResourcesLister",
    "build_response",
    "dra_pod",
    "dra_resource",
    "gpu_pod",
    "serve",
]

_REPO_ROOT = Path(__file__).resolve().parents[2]


class _Servicer(api_pb2_grpc.PodResourcesListerServicer):
    def __init__(self, state_path: Path, calls_path: Path) -> None:
        self.state_path = state_path
        self.calls_path = calls_path
        self.calls = 0
        self._lock = threading.Lock()
        self._raw: bytes | None = None
        self._state: dict[str, Any] = {}
        self._response = b""  # the encoded ListPodResourcesResponse

    def _load(self) -> dict[str, Any]:
        # Compare content, not stat: rapid same-size rewrites can reuse an
        # inode within one timestamp tick and look unchanged.
        try:
            raw = self.state_path.read_bytes()
        except FileNotFoundError:
            return self._state
        if raw != self._raw:
            self._state = json.loads(raw)
            response = build_response(self._state.get("pods", [])).SerializeToString()
            for pod in self._state.get("raw_pods_hex", []):
                response += _length_delimited(POD_RESOURCES_FIELD, bytes.fromhex(pod))
            self._response = response
            self._raw = raw
        return self._state

    def List(self, request: Any, context: grpc.ServicerContext) -> Any:
        with self._lock:
            self.calls += 1
            # Replaced, not rewritten in place: a reader must never see the
            # file truncated and take the count for 0.
            tmp = self.calls_path.with_name(self.calls_path.name + ".tmp")
            tmp.write_text(str(self.calls))
            os.replace(tmp, self.calls_path)
            state = self._load()
            response = self._response
        hang = float(state.get("hang_seconds") or 0)
        deadline = time.monotonic() + hang
        while time.monotonic() < deadline and context.is_active():
            time.sleep(0.01)
        if state.get("fail"):
            context.abort(getattr(grpc.StatusCode, state["fail"]), "injected failure")
        return response


LISTER = api_pb2.DESCRIPTOR.services_by_name["PodResourcesLister"]
POD_RESOURCES_FIELD = 1  # ListPodResourcesResponse.pod_resources


def _length_delimited(field: int, data: bytes) -> bytes:
    """One protobuf field of wire type 2 (bytes, strings, messages)."""
    varint, n = bytearray(), len(data)
    while n >= 0x80:
        varint.append(n & 0x7F | 0x80)
        n >>= 7
    varint.append(n)
    return bytes([field << 3 | 2]) + bytes(varint) + data


def serve(socket_path: str, state_path: Path) -> None:
    calls_path = Path(str(state_path) + ".calls")
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    servicer = _Servicer(state_path, calls_path)
    # The generated registration, but List answers with bytes already encoded,
    # so that raw_pods_hex can hold what no message object would serialise.
    handler = grpc.unary_unary_rpc_method_handler(
        servicer.List,
        request_deserializer=api_pb2.ListPodResourcesRequest.FromString,
        response_serializer=bytes,
    )
    server.add_generic_rpc_handlers(
        [grpc.method_handlers_generic_handler(LISTER.full_name, {"List": handler})]
    )
    server.add_insecure_port("unix://" + socket_path)
    server.start()
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    print("ready", flush=True)
    done.wait()
    server.stop(grace=0).wait()
    # Like a kubelet going away: the socket disappears with the server.
    with contextlib.suppress(FileNotFoundError):
        os.unlink(socket_path)


class FakePodResourcesLister:
    """Handle on a fake kubelet process. Use as a context manager."""

    def __init__(self, socket_path: str | Path, state_path: str | Path | None = None) -> None:
        self.socket_path = str(socket_path)
        if state_path is None:
            state_path = Path(self.socket_path).with_suffix(".state.json")
        self.state_path = Path(state_path)
        self._state: dict[str, Any] = {"pods": [], "fail": None, "hang_seconds": 0}
        self._proc: subprocess.Popen[str] | None = None
        self._write_state()

    def __enter__(self) -> FakePodResourcesLister:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def start(self, timeout: float = 15.0) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.socket_path)
        env = dict(os.environ, PYTHONPATH=str(_REPO_ROOT))
        self._proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "devtools.podresources",
                "--socket",
                self.socket_path,
                "--state",
                str(self.state_path),
            ],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            cwd=_REPO_ROOT,
        )
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()
        if line.strip() != "ready":
            self.stop()
            raise RuntimeError(f"fake kubelet did not start: {line!r}")
        deadline = time.monotonic() + timeout
        while not os.path.exists(self.socket_path):
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("fake kubelet socket did not appear")
            time.sleep(0.01)

    def stop(self) -> None:
        if self._proc is None:
            return
        self._proc.send_signal(signal.SIGTERM)
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        if self._proc.stdout:
            self._proc.stdout.close()
        self._proc = None

    def restart(self) -> None:
        """Stop, remove the socket and start again: what a kubelet restart does."""
        self.stop()
        self.start()

    def _write_state(self) -> None:
        fd, tmp = tempfile.mkstemp(dir=self.state_path.parent, prefix=".state-")
        with os.fdopen(fd, "w") as f:
            json.dump(self._state, f)
        os.rename(tmp, self.state_path)

    def set_pods(self, pods: list[dict[str, Any]]) -> None:
        self._state["pods"] = pods
        self._write_state()

    def set_failure(self, code: str | None) -> None:
        """Make List fail with a grpc.StatusCode name, or succeed again with None."""
        self._state["fail"] = code
        self._write_state()

    def set_raw_pods(self, pods: list[bytes]) -> None:
        """Send these encoded pods after the others, whatever they hold."""
        self._state["raw_pods_hex"] = [pod.hex() for pod in pods]
        self._write_state()

    def set_hang(self, seconds: float) -> None:
        self._state["hang_seconds"] = seconds
        self._write_state()

    def list_calls(self) -> int:
        try:
            return int(Path(str(self.state_path) + ".calls").read_text())
        except FileNotFoundError:
            return 0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--socket", required=True)
    parser.add_argument("--state", required=True, type=Path)
    args = parser.parse_args()
    serve(args.socket, args.state)
