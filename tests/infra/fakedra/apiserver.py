"""A fake Kubernetes API server: a JSON object store over real HTTP, in its own process.

It keeps objects by their item path and answers GET (an item, or a collection
as a list), POST to a collection (409 if the name exists), PUT (409 on a stale
resourceVersion), and DELETE, the way the real one does for the calls the
plugin makes. Run `python -m tests.infra.fakedra.apiserver`; it prints its URL.
"""

from __future__ import annotations

import json
import sys
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Store:
    def __init__(self) -> None:
        self.objects: dict[str, Any] = {}
        self.lock = threading.Lock()
        self.version = 0

    def stamp(self, obj: Any) -> Any:
        self.version += 1
        meta = obj.setdefault("metadata", {})
        meta.setdefault("uid", str(uuid.uuid4()))
        meta["resourceVersion"] = str(self.version)
        return obj


STORE = Store()


def status(code: int, message: str) -> tuple[int, Any]:
    return code, {"kind": "Status", "code": code, "message": message}


class Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _reply(self, code: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> Any:
        return json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))

    def do_GET(self) -> None:
        path = self.path.rstrip("/")
        with STORE.lock:
            if path in STORE.objects:
                self._reply(200, STORE.objects[path])
                return
            items = [o for p, o in STORE.objects.items() if p.rsplit("/", 1)[0] == path]
        if items:
            self._reply(200, {"kind": "List", "items": items})
        else:
            self._reply(*status(404, f"{path} not found"))

    def do_POST(self) -> None:
        body = self._body()
        path = self.path.rstrip("/") + "/" + body["metadata"]["name"]
        with STORE.lock:
            if path in STORE.objects:
                self._reply(*status(409, f"{path} already exists"))
                return
            STORE.objects[path] = STORE.stamp(body)
            self._reply(201, body)

    def do_PUT(self) -> None:
        body = self._body()
        path = self.path.rstrip("/")
        with STORE.lock:
            old = STORE.objects.get(path)
            if old is None:
                self._reply(*status(404, f"{path} not found"))
                return
            wanted = body.get("metadata", {}).get("resourceVersion")
            if wanted is not None and wanted != old["metadata"]["resourceVersion"]:
                self._reply(*status(409, f"{path} was modified"))
                return
            body.setdefault("metadata", {})["uid"] = old["metadata"]["uid"]
            STORE.objects[path] = STORE.stamp(body)
            self._reply(200, body)

    def do_DELETE(self) -> None:
        path = self.path.rstrip("/")
        with STORE.lock:
            old = STORE.objects.pop(path, None)
        self._reply(*((200, old) if old else status(404, f"{path} not found")))


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(f"http://127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
