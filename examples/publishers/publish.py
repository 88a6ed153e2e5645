#!/usr/bin/env python3
"""Publishing from Python with pyzmq (Debian: python3-zmq), speaking the wire format directly:
a two-frame message [event type, CloudEvents JSON]. The gateway fills id/time/specversion if absent.
"""
import json, sys, time, uuid
import zmq

endpoint = sys.argv[1] if len(sys.argv) > 1 else "tcp://127.0.0.1:5556"
ctx = zmq.Context()
sock = ctx.socket(zmq.XPUB)          # XPUB (not PUB) so we can wait for the gateway's subscription
sock.setsockopt(zmq.LINGER, 5000)
sock.connect(endpoint)
if not sock.poll(5000):               # the subscription message arrives once connected
    sys.exit(f"no subscriber on {endpoint}: is the gateway running?")
sock.recv()

event = {
    "specversion": "1.0",
    "id": str(uuid.uuid4()),
    "source": "python-example",
    "type": "auth.failure",
    "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    "data": {"user": "bob", "ip": "10.0.0.7", "password": "s3cret", "reason": "bad password"},
}
sock.send_multipart([event["type"].encode(), json.dumps(event).encode()])
print(event["id"])
sock.close()
ctx.term()
