#!/usr/bin/env python3
"""Play the mover demo from Python through agentbox serve.

    agentbox serve --app mover=examples/mover      # in one terminal
    python3 examples/python/play_mover.py           # in another

It finds the green square, holds Right for a second, checks that the square
moved at least 100 px, and finishes the episode; it exits 0 when it did,
1 when it did not. The server's address and token come from AGENTBOX_URL
and AGENTBOX_TOKEN, or the token file agentbox serve writes. With NumPy the
observations are arrays; without it, RGB bytes (both handled below).
"""

import os
import sys

try:
    import agentbox
except ImportError:  # not installed: use the package in this repository
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    import agentbox


def square_x(obs, width):
    """The mean x of the green square's pixels (None when there is none)."""
    if agentbox.have_numpy() and hasattr(obs, "shape"):
        import numpy as np

        green = (obs[:, :, 1] > 180) & (obs[:, :, 0] < 80) & (obs[:, :, 2] < 80)
        xs = np.nonzero(green)[1]
        return float(xs.mean()) if len(xs) else None
    total = n = 0
    for i in range(0, len(obs), 3):  # RGB bytes
        if obs[i + 1] > 180 and obs[i] < 80 and obs[i + 2] < 80:
            total += (i // 3) % width
            n += 1
    return total / n if n else None


def main():
    with agentbox.make("mover", task="Move the character right.") as env:
        obs, info = env.reset()
        width = info["observation"]["frame"]["width"]
        print("episode %d, trace %s" % (info["episode"], info["trace"]))
        x0 = square_x(obs, width)
        if x0 is None:
            print("no green square on the screen", file=sys.stderr)
            return 1
        for action in ({"action": "key_down", "key": "Right"}, {"action": "wait", "ms": 1000}, {"action": "key_up", "key": "Right"}):
            obs, reward, terminated, truncated, info = env.step(action)
            if not info["result"]["ok"] or terminated or truncated:
                print("step %d (%s) failed: %s" % (info["step"], action["action"], info["result"]), file=sys.stderr)
                return 1
        x1 = square_x(obs, width)
        moved = x1 - x0
        ok = moved >= 100
        print("the square moved %.0f px (from x=%.0f to x=%.0f)" % (moved, x0, x1))
        _, _, terminated, _, info = env.step({"action": "done", "success": ok, "message": "moved %.0f px" % moved})
        print("episode ended: %s (%s)" % (info["ended"]["outcome"], info["ended"]["message"]))
        return 0 if ok and terminated else 1


if __name__ == "__main__":
    sys.exit(main())
