"""A fake API server's HTTP handler served on loopback, and a kubeconfig pointing at it."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


@contextmanager
def serving(
    handler: type[BaseHTTPRequestHandler], workdir: Path, user: dict[str, Any]
) -> Iterator[Path]:
    """Serve `handler` on a free loopback port for the block; yields a kubeconfig for
    plain HTTP to it with `user`'s credentials (say {"token": "t"})."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    port = server.server_address[1]
    kubeconfig = workdir / f"kubeconfig-{port}"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "fake", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
                "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "u"}}],
                "current-context": "fake",
                "users": [{"name": "u", "user": user}],
            }
        )
    )
    try:
        yield kubeconfig
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
