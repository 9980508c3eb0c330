#!/usr/bin/env python3
"""The step's latency from Python, over each transport: a mouse move and
the next observation (an H×W×3 array with NumPy, else RGB bytes), the
trace written, as `agentbox bench` measures the Go client's.

    python3 python/benchmarks/step.py --samples 500     # AGENTBOX_URL, AGENTBOX_TOKEN

Variants, one environment each, sampled in turn (one step of each, then
the next) so a busy moment weighs on all alike:

  websocket        one WebSocket round trip; the screen is unchanged, so no pixels travel
  http             POST /act?observe=rgba, the binary answer
  http-json        the same, the JSON answer (pixels in base64)
  *-full           the whole frame every step (1.2 MB of RGBA at 640×480)

With --serve it reads a number N per line on stdin, takes N samples of
each variant and writes their durations (ns) as one JSON line: the Go test
that sets Python against the Go client in the same run drives it so.
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import agentbox  # noqa: E402

VARIANTS = ["websocket", "http", "http-json", "websocket-full", "http-full", "http-json-full"]


def open_envs(client, variants):
    envs = {}
    for v in variants:
        transport = "websocket" if v.startswith("websocket") else "http"
        env = client.create("mover", transport=transport)
        env.http_binary = "json" not in v
        env.always_image = v.endswith("-full")
        env.reset()
        envs[v] = env
    return envs


def sample(envs, n, start=0):
    out = {v: [] for v in envs}
    w, h = 640, 480
    for i in range(start, start + n):
        x, y = 10 + (i * 37) % (w - 20), 10 + (i * 53) % (h - 20)
        a = {"action": "mouse_move", "x": x, "y": y}
        for v, env in envs.items():
            t = time.perf_counter_ns()
            obs, _, _, _, info = env.step(a)
            d = time.perf_counter_ns() - t
            if obs is None or info["cursor"] != {"x": x, "y": y}:
                raise SystemExit("%s: step %d: no screen, or the pointer is not where it was sent: %s" % (v, i, info["cursor"]))
            out[v].append(d)
    return out


def pct(ns, p):
    s = sorted(ns)
    return s[min(len(s) - 1, int(p * len(s)))] / 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samples", type=int, default=500)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--serve", action="store_true", help="take samples when asked on stdin (for the Go test)")
    args = ap.parse_args()
    variants = [v for v in args.variants.split(",") if v]
    for v in variants:
        if v not in VARIANTS:
            ap.error("unknown variant %r: want %s" % (v, ", ".join(VARIANTS)))
    with agentbox.Client() as client:
        envs = open_envs(client, variants)
        try:
            sample(envs, 10)  # warm up
            if args.serve:
                print(json.dumps({"ready": True, "observation": next(iter(envs.values())).observation}), flush=True)
                done = 10
                for line in sys.stdin:
                    n = int(line)
                    print(json.dumps(sample(envs, n, done)), flush=True)
                    done += n
                return
            got = sample(envs, args.samples, 10)
            print("the step from Python (%d samples each, observation %s):" % (args.samples, next(iter(envs.values())).observation))
            for v in variants:
                print("  %-16s p50 %6.2f ms   p95 %6.2f ms" % (v, pct(got[v], 0.5), pct(got[v], 0.95)))
        finally:
            for env in envs.values():
                env.close()


if __name__ == "__main__":
    main()
