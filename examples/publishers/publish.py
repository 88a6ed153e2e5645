#!/usr/bin/env python3
"""Publishing from Python with pyzmq (Debian: python3-zmq), speaking the wire format directly:
a two-frame message [event type, CloudEvents JSON]. The gateway fills id/time/specversion if absent.
"""
import json, sys, time, uuid
try:
    import zmq
except ImportError:
    sys.exit("needs pyzmq: apt install python3-zmq (Debian's /usr/bin/python3), or pip install pyzmq")

endpoint = sys.argv[1] if len(sys.argv) > 1 else "tcp://127.0.0.1:5556"
ctx = zmq.Context()
sock = ctx.socket(zmq.XPUB)          # XPUB (not PUB) so we can wait for the gateway's subscription
sock.setsockopt(zmq.LINGER, 5000)
try:
    sock.connect(endpoint)
except zmq.ZMQError as e:
    sys.exit(f"cannot connect to {endpoint!r}: {e} (expected an endpoint such as tcp://127.0.0.1:5556)")
if not sock.poll(5000):               # the subscription message arrives once connected
    sys.exit(f"no subscriber on {endpoint}: is the gateway running?")
# The gateway subscribes once per `bus.topics` prefix (or once to everything); collect them all,
# because ZeroMQ silently drops a message that no subscription matches.
prefixes = set()
while sock.poll(200):
    frame = sock.recv()
    if frame[:1] == b"\x01":
        prefixes.add(frame[1:])
    elif frame[:1] == b"\x00":
        prefixes.discard(frame[1:])

event = {
    "specversion": "1.0",
    "id": str(uuid.uuid4()),
    "source": "python-example",
    "type": "auth.failure",
    "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    "data": {"user": "bob", "ip": "10.0.0.7", "reason": "bad password"},
}
topic = event["type"].encode()
if not any(topic.startswith(p) for p in prefixes):
    sys.exit(f"no subscriber on {endpoint} takes {event['type']!r}: check the gateway's bus.topics")
sock.send_multipart([topic, json.dumps(event).encode()])
print(event["id"])
sock.close()
ctx.term()
