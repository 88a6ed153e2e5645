#!/usr/bin/env python3
"""PROGRAM transform hook in Python, as a bare executable (no descriptor): its handshake line says
what it is. Adds data.network ("private", "loopback", "public" or "invalid") from the client
address. Runs after the quickstart's _10_redact.yaml, which renamed data.ip to data.source_ip.
"""
import ipaddress
import json
import sys


def send(message):
    sys.stdout.write(json.dumps(message, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def network_of(address):
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return "invalid"
    if ip.is_loopback:
        return "loopback"
    return "private" if ip.is_private else "public"


send({"hookgate": 1, "kind": "transform", "events": ["auth.*"]})
for line in sys.stdin:
    request = json.loads(line)
    event = request["event"]
    data = event.get("data")
    address = data.get("source_ip") if isinstance(data, dict) else None
    if not isinstance(address, str):
        send({"id": request["id"], "action": "skip"})  # nothing to classify: not a failure
        continue
    data["network"] = network_of(address)
    # The whole event goes back; attributes left out (id, source, time) would keep their values.
    send({"id": request["id"], "action": "replace", "event": event})
