"""A unix-socket relay that answers each new connection only after a delay.

It stands for a kubelet too busy to answer a new connection at once: the
client's connect succeeds (the kernel queues it), but nothing comes back,
not even the server's HTTP/2 SETTINGS, until `delay` seconds have passed.
Then the connection is relayed to `upstream` both ways.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from pathlib import Path


class SlowAcceptRelay:
    """Listens on `socket_path`; use as a context manager."""

    def __init__(self, socket_path: str | Path, upstream: str, delay: float) -> None:
        self.socket_path = str(socket_path)
        self.upstream = upstream
        self.delay = delay
        self._listener = socket.socket(socket.AF_UNIX)
        self._listener.bind(self.socket_path)
        self._listener.listen()
        self._sockets: list[socket.socket] = [self._listener]
        self._lock = threading.Lock()

    def __enter__(self) -> SlowAcceptRelay:
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            for sock in self._sockets:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._relay, args=(client,), daemon=True).start()

    def _relay(self, client: socket.socket) -> None:
        server = socket.socket(socket.AF_UNIX)
        with self._lock:  # closed on exit even while still waiting
            self._sockets += [client, server]
        time.sleep(self.delay)
        try:
            server.connect(self.upstream)
        except OSError:
            client.close()
            return
        threading.Thread(target=_pipe, args=(client, server), daemon=True).start()
        _pipe(server, client)


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        pass  # either end closed
