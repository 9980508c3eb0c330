#!/usr/bin/env python3
"""A hostile decision-maker for `agentbox run --agent exec`: it answers
with garbage, unknown actions, off-screen coordinates and megabytes of
text (each is told back), then floods thousands of actions as fast as it
can, then finishes. agentbox must validate, cap, rate-limit and record all
of it, and never crash."""
import json
import sys

BURST = int(sys.argv[1]) if len(sys.argv) > 1 else 2000

def send(obj):
    sys.stdout.write((obj if isinstance(obj, str) else json.dumps(obj)) + "\n")
    sys.stdout.flush()

step = 0
bad = [
    "this is not json",
    '{"action": "fly", "to": "moon"}',
    '{"action": "click", "x": 1e12, "y": 5}',
    json.dumps({"action": "type", "text": "A" * (1 << 20)}),
]
for line in sys.stdin:
    msg = json.loads(line)
    if msg["type"] == "start":
        continue
    if msg["type"] == "error":
        if bad:
            send(bad.pop(0))
        else:
            send({"action": "mouse_move", "x": 1, "y": 1})
        continue
    step += 1
    if step == 1:
        send(bad.pop(0))
    elif step <= BURST:
        send({"action": "mouse_move", "x": step % 600, "y": step % 400})
    else:
        send({"action": "done", "message": f"sent {BURST} actions"})
