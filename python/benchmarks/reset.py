#!/usr/bin/env python3
"""Reset latency from Python, as the client sees it (reset() to the first
observation in hand, RGBA over the WebSocket): mode "fresh" (a new sandbox,
from the pool when the server has one) against mode "relaunch" (the same
sandbox reset in place), in turn, one reset of each per round, after one
round to warm up. A step between resets (the key Right pressed), so each
reset ends a running episode.

    agentbox serve --pool 2 --app mover=examples/mover &
    python3 python/benchmarks/reset.py --resets 20     # AGENTBOX_URL, AGENTBOX_TOKEN

Against a server that has no such app (serve in a cluster,
deploy/kubernetes/serve.yaml), --upload DIR sends the app first; --cafile
trusts the server's own certificate.
"""

import argparse
import json
import os
import ssl
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import agentbox  # noqa: E402


def pct(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--resets", type=int, default=20)
    ap.add_argument("--app", default="mover")
    ap.add_argument("--upload", metavar="DIR", help="upload this app directory and reset episodes of it (instead of --app)")
    ap.add_argument("--cafile", help="trust this certificate (PEM) for an https server")
    ap.add_argument("--modes", default="fresh,relaunch", help="reset modes measured in turn")
    ap.add_argument("--json", action="store_true", help="print the times (ms) of each mode as one JSON object instead (agentbox bench reads it)")
    args = ap.parse_args()
    ctx = ssl.create_default_context(cafile=args.cafile) if args.cafile else None
    client = agentbox.Client(ssl_context=ctx)
    app, upload = args.app, None
    if args.upload:
        app, upload = None, client.upload(args.upload)["id"]
    envs = {mode: client.create(app, upload=upload, reset_mode=mode) for mode in args.modes.split(",")}
    times = {mode: [] for mode in envs}
    try:
        for env in envs.values():
            env.reset()  # the created episode
        for i in range(args.resets + 1):
            for mode, env in envs.items():
                env.step({"action": "key", "keys": "Right"})
                t = time.perf_counter()
                obs, info = env.reset()
                d = time.perf_counter() - t
                if obs is None or not info["running"]:
                    raise SystemExit("%s: reset %d: no screen, or the app is not running" % (mode, i))
                if i > 0:
                    times[mode].append(d * 1000)
    finally:
        for env in envs.values():
            env.close()
    if args.json:
        print(json.dumps(times))
        return
    for mode, v in times.items():
        print("reset %-8s n=%d  p50 %.1f ms  p95 %.1f ms  max %.1f ms" % (mode, len(v), pct(v, 50), pct(v, 95), max(v)))


if __name__ == "__main__":
    main()
