"""Draws the time the app reads, and a block moving with it.

The picture depends on the clock alone: with agentbox's virtual clock it
changes only when agentbox moves the time, so a replay draws the same
frames. It polls every 20 ms of real time, so a moved clock shows at once.
"""
import sys
import time

WIDTH = 36


def frame(now):
    ms = int(now * 1000)
    stamp = time.strftime("%H:%M:%S", time.gmtime(now)) + ".%03d" % (ms % 1000)
    col = (ms // 100) % WIDTH
    bar = "." * col + "#" + "." * (WIDTH - col - 1)
    return "\x1b[H\x1b[2J" + stamp + "\r\n" + bar


def main():
    out = sys.stdout
    out.write("\x1b[?25l")  # no cursor: nothing on screen but the clock's
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
