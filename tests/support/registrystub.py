"""A Schema Registry on 127.0.0.1 speaking the part of Confluent's REST API that confluent-kafka's
serializers and eosctl's decoder use: register a schema under a subject, a schema by id or GUID, its
subject-version pairs. Stdlib only, one thread; it counts the requests (a test asserts a schema is fetched
once per id) and can require basic auth.
"""

from __future__ import annotations

import base64
import json
import threading
import uuid
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlparse


class RegistryStub:
    def __init__(self, username: str | None = None, password: str | None = None) -> None:
        self.schemas: dict[int, dict[str, Any]] = {}  # id -> {"schema", "schemaType", "references", "guid"}
        self.subjects: dict[str, list[int]] = {}  # subject -> ids by version (1-based)
        self.requests: Counter[str] = Counter()  # "GET /schemas/ids/1" -> times asked
        self.auth = (f"Basic {base64.b64encode(f'{username}:{password}'.encode()).decode()}"
                     if username is not None else None)
        self._lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                stub._serve(self, "GET")

            def do_POST(self) -> None:  # noqa: N802
                stub._serve(self, "POST")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> RegistryStub:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def register(self, subject: str, schema: str, schema_type: str = "AVRO",
                 references: list[dict[str, Any]] | None = None) -> int:
        with self._lock:
            sid = next((i for i, known in self.schemas.items()
                        if known["schema"] == schema and known["schemaType"] == schema_type), None)
            if sid is None:
                sid = len(self.schemas) + 1
                self.schemas[sid] = {"schema": schema, "schemaType": schema_type,
                                     "references": references or [], "guid": str(uuid.uuid4())}
            versions = self.subjects.setdefault(subject, [])
            if sid not in versions:
                versions.append(sid)
            return sid

    def _serve(self, h: BaseHTTPRequestHandler, method: str) -> None:
        path = urlparse(h.path).path
        parts = [unquote(p) for p in path.strip("/").split("/")]
        self.requests[f"{method} {path}"] += 1
        if self.auth is not None and h.headers.get("Authorization") != self.auth:
            return self._answer(h, 401, {"error_code": 401, "message": "Unauthorized"})
        body = json.loads(h.rfile.read(int(h.headers.get("Content-Length") or 0)) or b"null")
        if method == "POST" and len(parts) == 3 and parts[0] == "subjects" and parts[2] == "versions":
            sid = self.register(parts[1], body["schema"], body.get("schemaType") or "AVRO",
                                body.get("references"))
            return self._answer(h, 200, {"id": sid, "guid": self.schemas[sid]["guid"]})
        if method == "GET" and parts[:2] == ["schemas", "ids"] and len(parts) >= 3 and parts[2].isdigit():
            sid = int(parts[2])
            if sid not in self.schemas:
                return self._answer(h, 404, {"error_code": 40403, "message": f"Schema {sid} not found"})
            if len(parts) == 4 and parts[3] == "versions":
                return self._answer(h, 200, [{"subject": s, "version": v.index(sid) + 1}
                                             for s, v in self.subjects.items() if sid in v])
            return self._answer(h, 200, self._schema(sid))
        if method == "GET" and parts[:2] == ["schemas", "guids"] and len(parts) == 3:
            sid = next((i for i, s in self.schemas.items() if s["guid"] == parts[2]), None)
            if sid is None:
                return self._answer(h, 404, {"error_code": 40403, "message": f"Schema {parts[2]} not found"})
            return self._answer(h, 200, self._schema(sid))
        if method == "GET" and len(parts) == 4 and parts[0] == "subjects" and parts[2] == "versions":
            ids = self.subjects.get(parts[1], [])
            version = len(ids) if parts[3] == "latest" else int(parts[3])
            if not 1 <= version <= len(ids):
                return self._answer(h, 404, {"error_code": 40402, "message": "Version not found"})
            sid = ids[version - 1]
            return self._answer(h, 200, {"subject": parts[1], "version": version, **self._schema(sid)})
        return self._answer(h, 404, {"error_code": 404, "message": f"no route {method} {path}"})

    def _schema(self, sid: int) -> dict[str, Any]:
        s = self.schemas[sid]
        return {"id": sid, "guid": s["guid"], "schema": s["schema"], "schemaType": s["schemaType"],
                "references": s["references"]}

    @staticmethod
    def _answer(h: BaseHTTPRequestHandler, status: int, doc: Any) -> None:
        data = json.dumps(doc).encode()
        h.send_response(status)
        h.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)
