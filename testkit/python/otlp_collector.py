"""A test OpenTelemetry collector: OTLP/HTTP traces (protobuf) on 127.0.0.1:PORT, each export
decoded with the official opentelemetry-proto package and written to OUT as one JSON line per
span (ids in hex, attributes as a dict, the resource's attributes beside them); the raw bodies
are appended to OUT.raw. A body that does not decode is answered 400 and written as an
{"error": ...} line. Mode `hanging`: accepts each export and never answers.

usage: otlp_collector.py PORT OUT up|hanging
"""

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

PORT, OUT, MODE = int(sys.argv[1]), sys.argv[2], sys.argv[3]
LOCK = threading.Lock()


def value(v):
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind else None


def spans(req):
    for rs in req.resource_spans:
        resource = {kv.key: value(kv.value) for kv in rs.resource.attributes}
        for ss in rs.scope_spans:
            for s in ss.spans:
                yield {
                    "trace_id": s.trace_id.hex(),
                    "span_id": s.span_id.hex(),
                    "parent_span_id": s.parent_span_id.hex(),
                    "trace_state": s.trace_state,
                    "name": s.name,
                    "kind": s.kind,
                    "start": s.start_time_unix_nano,
                    "end": s.end_time_unix_nano,
                    "attributes": {kv.key: value(kv.value) for kv in s.attributes},
                    "status_code": s.status.code,
                    "status_message": s.status.message,
                    "flags": s.flags,
                    "scope": ss.scope.name,
                    "resource": resource,
                }


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if MODE == "hanging":
            time.sleep(3600)
            return
        req = trace_service_pb2.ExportTraceServiceRequest()
        try:
            req.ParseFromString(body)
            lines = [json.dumps(s) for s in spans(req)]
            status = 200
        except Exception as e:  # noqa: BLE001 - any decoding failure is the test's to see
            lines = [json.dumps({"error": repr(e)})]
            status = 400
        if self.headers.get("Content-Type") != "application/x-protobuf":
            lines.append(json.dumps({"error": "content type " + str(self.headers.get("Content-Type"))}))
        with LOCK:
            with open(OUT + ".raw", "ab") as f:
                f.write(body)
            with open(OUT, "a") as f:
                for line in lines:
                    f.write(line + "\n")
        reply = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
        self.send_response(status)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", PORT), Handler)
server.daemon_threads = True
server.serve_forever()
