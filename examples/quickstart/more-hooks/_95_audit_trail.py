#!/usr/bin/env python3
"""PROGRAM observe hook in Python: one audit line per event on stderr, which the gateway writes to
its log as `hook audit_trail stderr: ...`. Observers get a copy of the final event after the chain,
run in parallel with delivery and cannot change or stop anything: the answer is always continue.
A demo, not an audit trail: the gateway logs at most 20 stderr lines a second per hook and only
counts the rest (hookgate_hook_stderr_lines_total); write to a file for a trail that keeps up
(examples/hooks/program/_40_audit.py takes a path).
"""
import json
import os
import sys


def send(message):
    sys.stdout.write(json.dumps(message, separators=(",", ":")) + "\n")
    sys.stdout.flush()


send({"hookgate": 1, "kind": "observe", "events": ["*"]})
name = os.environ.get("HOOKGATE_HOOK_NAME", "audit_trail")
for line in sys.stdin:
    request = json.loads(line)
    event = request["event"]
    data = event.get("data") if isinstance(event.get("data"), dict) else {}
    record = {"hook": name, "id": event.get("id"), "type": event.get("type"),
              "user": data.get("user")}
    print("audit " + json.dumps(record, sort_keys=True), file=sys.stderr, flush=True)
    send({"id": request["id"], "action": "continue"})
