#!/usr/bin/env python3
"""A second subscriber on the proxy's backend: prints every event it sees (a debugging tap)."""
import json, sys
try:
    import zmq
except ImportError:
    sys.exit("needs pyzmq: apt install python3-zmq (Debian's /usr/bin/python3), or pip install pyzmq")

ctx = zmq.Context()
sub = ctx.socket(zmq.SUB)
sub.connect(sys.argv[1] if len(sys.argv) > 1 else "tcp://127.0.0.1:5581")
sub.setsockopt(zmq.SUBSCRIBE, b"")
while True:
    frames = sub.recv_multipart()
    event = json.loads(frames[-1])
    print(f"[tap] {event['type']} from {event.get('source')}", flush=True)
