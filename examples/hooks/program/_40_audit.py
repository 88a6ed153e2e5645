#!/usr/bin/env python3
"""hookgate program hook: an audit trail of auth events (observe; never changes anything).

Protocol (PRODUCT.md "Hooks", form 2): print one handshake line, then answer each request line
{"id":N,"event":{...}} with one line echoing the id. Every line is flushed at once: the gateway waits
for it (and counts its timeout) while Python would otherwise sit on a full buffer.

Config (`config:` beside `kind` in a YAML descriptor, or none): {"path": "/var/log/hookgate/audit.jsonl"}
appends one JSON line per event to that file; without a path the lines go to stderr, which the
gateway forwards to its log at most 20 lines a second per hook (the rest are only counted, in
hookgate_hook_stderr_lines_total): give a path for an audit trail that keeps up.
"""
import json
import os
import sys


def send(obj):
    sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def main():
    try:
        config = json.loads(os.environ.get("HOOKGATE_HOOK_CONFIG") or "{}")
    except ValueError:
        config = {}
    path = config.get("path") if isinstance(config, dict) else None
    out = open(path, "a", encoding="utf-8") if path else sys.stderr

    send({"hookgate": 1, "kind": "observe", "events": ["auth.*"]})
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
            rid = request["id"]
        except (ValueError, KeyError, TypeError):
            continue  # nothing to answer without an id; the gateway times the request out
        event = request.get("event") or {}
        data = event.get("data") if isinstance(event.get("data"), dict) else {}
        record = {
            "id": event.get("id"),
            "type": event.get("type"),
            "source": event.get("source"),
            "time": event.get("time"),
            "user": data.get("user"),
        }
        out.write(json.dumps(record, separators=(",", ":")) + "\n")
        out.flush()
        send({"id": rid, "action": "continue"})
    # stdin closed: the gateway is unloading the hook; exit without waiting for a TERM.


if __name__ == "__main__":
    main()
