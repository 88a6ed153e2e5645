#!/usr/bin/env python3
"""A Splunk-HEC-shaped collector for the walkthrough: /services/collector/event checks the
`Authorization: Splunk <token>` header and the HEC event shape; /oncall prints alerts; /broken
answers 400 (a misconfigured endpoint)."""
import json, os, sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# Requests are handled on threads of their own: print() writes a line and its newline apart, so
# two deliveries at once could run their lines together. One at a time.
_print_lock = threading.Lock()


def say(text):
    with _print_lock:
        print(text, flush=True)

TOKEN = os.environ.get("HEC_TOKEN", "00000000-0000-0000-0000-000000000000")
FORBIDDEN = ("password", "token", "session_cookie")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def reply(self, status, body=b""):
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.path == "/broken":
            return self.reply(400, b'{"text":"Incorrect index","code":7}')
        doc = json.loads(raw or b"{}")
        if self.path == "/oncall":
            d = doc.get("data", {})
            say(f"[oncall] PAGE: delivery to '{d.get('webhook')}' is dead after {d.get('attempts')} attempts "
                f"(event {d.get('event_id')}): {d.get('reason')}")
            return self.reply(200)
        if self.headers.get("Authorization") != f"Splunk {TOKEN}":
            return self.reply(401, b'{"text":"Invalid token","code":4}')
        missing = [k for k in ("time", "host", "source", "sourcetype", "event") if k not in doc]
        leaked = [k for k in FORBIDDEN if k in doc.get("event", {}).get("data", {})]
        if missing or leaked:
            say(f"[splunk] REJECTED missing={missing} leaked={leaked}")
            return self.reply(400, b'{"text":"Invalid data format","code":6}')
        data = doc["event"]["data"]
        say(f"[splunk] index={doc.get('index')} sourcetype={doc['sourcetype']} host={doc['host']} "
            f"user={data.get('user')} source_ip={data.get('source_ip')} env={data.get('environment')}")
        self.reply(200, b'{"text":"Success","code":0}')

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8788
    print(f"[hec] listening on 127.0.0.1:{port}", flush=True)
    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
