"""Draws a pattern chosen by the 100 ms slot of the time the app reads."""
import random
import sys
import time

COLS, ROWS = 40, 5


def frame(now):
    rng = random.Random(int(now * 10))
    rows = ("".join("#" if rng.random() < 0.5 else " " for _ in range(COLS)) for _ in range(ROWS))
    return "\x1b[H\x1b[2J" + "\r\n".join(rows)


def main():
    out = sys.stdout
    out.write("\x1b[?25l")  # no cursor
    last = None
    while True:
        f = frame(time.time())
        if f != last:
            out.write(f)
            out.flush()
            last = f
        time.sleep(0.02)


if __name__ == "__main__":
    main()
