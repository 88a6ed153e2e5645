#!/usr/bin/env python3
"""A stand-in "auth service": publishes auth.failure events on the hookgate bus with pyzmq, some
carrying secrets the gateway must strip, some health-check noise it must drop."""
import json, random, sys, time, uuid
try:
    import zmq
except ImportError:
    sys.exit("needs pyzmq: apt install python3-zmq (Debian's /usr/bin/python3), or pip install pyzmq")

endpoint = sys.argv[1] if len(sys.argv) > 1 else "tcp://127.0.0.1:5566"
count = int(sys.argv[2]) if len(sys.argv) > 2 else 5

ctx = zmq.Context()
sock = ctx.socket(zmq.XPUB)
sock.setsockopt(zmq.LINGER, 5000)
# Past the send HWM an XPUB (like a PUB) drops silently; with NODROP the send fails with
# zmq.Again instead, and the loop below waits and retries: a burst slows down, nothing is lost.
sock.setsockopt(zmq.XPUB_NODROP, 1)
sock.connect(endpoint)
if not sock.poll(5000):
    sys.exit(f"auth-service: no gateway subscribed on {endpoint}")
sock.recv()

# The stamps hookgate's publisher libraries put on every event: a stream id for this process and
# a number that grows by one per event sent. What never reached the gateway's spool (ZeroMQ's
# queues when the gateway is killed, a network blip) then shows as a gap: counted in
# hookgate_bus_messages_dropped_total and logged, instead of lost without a word.
stream = str(uuid.uuid4())
users = ["ann", "bob", "carol", "healthcheck-lb", "dave"]
for i in range(count):
    user = users[i % len(users)]
    event = {
        "specversion": "1.0", "id": str(uuid.uuid4()), "source": "auth-service/login",
        "type": "auth.failure", "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "data": {"user": user, "ip": f"10.0.{random.randint(0, 255)}.{random.randint(1, 254)}",
                 "reason": "bad password", "password": "hunter2", "token": "eyJhbGciOi...",
                 "user_agent": "kube-probe/1.29" if user.startswith("healthcheck") else "Mozilla/5.0"},
        "hookgatestream": stream, "hookgateseq": i + 1,
    }
    frames = [b"auth.failure", json.dumps(event).encode()]
    while True:
        try:
            sock.send_multipart(frames, flags=zmq.NOBLOCK)
            break
        except zmq.Again:
            time.sleep(0.001)
    print(f"auth-service: published {event['id']} user={user}", flush=True)
sock.close()
ctx.term()
