#!/usr/bin/env python3
"""A webhook receiver that verifies hookgate's signatures the way receivers do, and prints each
delivery. Standard library only (the `standardwebhooks`/`svix` libraries compute the same thing).

    HOOKGATE_QUICKSTART_SECRET=whsec_... python3 receiver.py --port 8787

The variable is the one examples/quickstart/hookgate.yaml signs with, so one export serves both
(HOOKGATE_SECRET is still read when it is the only one set).
"""
import argparse, base64, hashlib, hmac, json, os, sys, time
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# Requests are handled on threads of their own: print() writes a line and its newline apart, so
# two deliveries at once could run their lines together. One at a time.
_print_lock = threading.Lock()


def say(text):
    with _print_lock:
        print(text, flush=True)

SECRET = (os.environ.get("HOOKGATE_QUICKSTART_SECRET") or os.environ.get("HOOKGATE_SECRET")
          or "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
TOLERANCE_S = 300


def verify_x_signature(headers, body):
    # X-Signature: sha256=<hex HMAC-SHA256(secret bytes as configured, body)>
    expected = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(headers.get("X-Signature", ""), expected)


def verify_standard_webhooks(headers, body):
    # webhook-signature: v1,<base64 HMAC-SHA256(key, "<id>.<timestamp>.<body>")>, key = base64 of
    # the secret after "whsec_" (else the raw secret bytes).
    msg_id, ts, sigs = headers.get("webhook-id"), headers.get("webhook-timestamp"), headers.get("webhook-signature", "")
    if not msg_id or not ts or abs(time.time() - int(ts)) > TOLERANCE_S:
        return False
    key = base64.b64decode(SECRET[6:]) if SECRET.startswith("whsec_") else SECRET.encode()
    signed = f"{msg_id}.{ts}.".encode() + body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    return any(hmac.compare_digest(s.split(",", 1)[1], expected) for s in sigs.split() if s.startswith("v1,"))


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as hookgate reuses connections

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        ok_x, ok_std = verify_x_signature(self.headers, body), verify_standard_webhooks(self.headers, body)
        status = 200 if ok_x and ok_std else 401
        event = json.loads(body or b"{}")
        mark = "verified" if status == 200 else "SIGNATURE MISMATCH"
        say(f"[receiver] {self.headers.get('X-Hookgate-Event')} delivery={self.headers.get('X-Hookgate-Delivery')} "
            f"{mark} (X-Signature={'ok' if ok_x else 'bad'}, webhook-signature={'ok' if ok_std else 'bad'})\n"
            f"           {json.dumps(event.get('data', event), sort_keys=True)}")
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=int(os.environ.get("HOOKGATE_RECEIVER_PORT", 8787)))
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    say(f"[receiver] listening on http://127.0.0.1:{args.port}/hooks")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
