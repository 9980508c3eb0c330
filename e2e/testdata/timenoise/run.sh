#!/bin/sh
# A time-driven picture for TestForkWallClockDiverges: like the clock demo
# (examples/clock), a terminal drawn from the time the app reads, but every
# 100 ms slot of the wall clock draws its own random pattern over the whole
# window, so two different moments differ in about half the cells — far
# beyond the replay rules' tolerance — where the clock demo's two moments
# may differ in only a few digits (about 1% of its window, near the 0.5%
# allowed: a later frame then matched by chance).
here=$(dirname "$0")
exec xterm -T "time noise" -geometry 40x6+0+0 -fa Mono -fs 12 +sb -e python3 "$here/noise.py"
