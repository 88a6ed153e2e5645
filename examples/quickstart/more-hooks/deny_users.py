#!/usr/bin/env python3
"""PROGRAM veto hook (co-process; see _40_deny_users.yaml): vetoes events of blocked users.

The gateway starts this once and keeps it running. Protocol: print one handshake line, then answer
each request line {"id": N, "event": {...}} with exactly one line that echoes the id. Flush every
line: the gateway is waiting for it. The config map comes as JSON in HOOKGATE_HOOK_CONFIG.
"""
import json
import os
import sys


def send(message):
    sys.stdout.write(json.dumps(message, separators=(",", ":")) + "\n")
    sys.stdout.flush()


config = json.loads(os.environ.get("HOOKGATE_HOOK_CONFIG") or "{}")
blocked = set(config.get("users", []))

# Under a descriptor the descriptor's kind and events win, so the version alone is enough.
send({"hookgate": 1})
for line in sys.stdin:  # stdin closes when the gateway unloads the hook: then exit
    request = json.loads(line)
    data = request["event"].get("data")
    user = data.get("user") if isinstance(data, dict) else None
    if user in blocked:
        send({"id": request["id"], "action": "veto", "reason": f"user {user} is blocked"})
    else:
        send({"id": request["id"], "action": "continue"})
