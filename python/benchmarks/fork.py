#!/usr/bin/env python3
"""Fork from Python, as the client sees it: a 50-step mover episode forked
into 4 (env.fork(4) until all four are ready, their first observations
in hand), several times, each on a fresh episode. The mover must move by
key presses alone (--step): by time it cannot be forked exactly on the
wall clock.

    mkdir /tmp/stepmover && cp mover /tmp/stepmover/ &&
      echo '{"command":"mover","args":["--step","7"],"window_title":"mover","ready_output":"mover: ready"}' \\
        > /tmp/stepmover/agentbox.json
    agentbox serve --pool 4 --max-envs 5 --app mover=/tmp/stepmover &
    python3 python/benchmarks/fork.py --forks 5     # AGENTBOX_URL, AGENTBOX_TOKEN
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import agentbox  # noqa: E402


def pct(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--forks", type=int, default=5, help="times the episode is forked")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--count", type=int, default=4)
    ap.add_argument("--app", default="mover")
    args = ap.parse_args()
    client = agentbox.Client()
    keys = ["Right", "Right", "Down", "Right", "Down"]
    times = []
    for i in range(args.forks):
        with client.create(args.app, observation="rgba") as env:
            env.reset()
            for s in range(args.steps):
                env.act({"action": "key", "keys": keys[s % len(keys)]})
            t = time.perf_counter()
            forks = env.fork(args.count)
            try:
                for f in forks:
                    obs, info = f.reset()  # the forked state's first observation
                    if obs is None or not info["running"]:
                        raise SystemExit("fork %d: no screen, or the app is not running" % i)
                times.append((time.perf_counter() - t) * 1000)
            finally:
                for f in forks:
                    f.close()
    print("fork of a %d-step episode into %d, until all are ready: n=%d  p50 %.0f ms  p95 %.0f ms  min %.0f ms" % (
        args.steps, args.count, len(times), pct(times, 50), pct(times, 95), min(times)))


if __name__ == "__main__":
    main()
