#!/bin/sh
# The virtual clock's demo app (README: Virtual clock): a terminal whose
# picture is a function of the time the app reads — the time with its
# milliseconds and a block moving one column per 100 ms. Every program here
# (sh, xterm, python3) is dynamically linked, so --clock virtual can fake
# their time; on the wall clock the picture changes on its own.
here=$(dirname "$0")
exec xterm -T "clock demo" -geometry 40x6+0+0 -fa Mono -fs 12 +sb -e python3 "$here/clock.py"
