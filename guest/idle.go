package guest

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"time"
)

// appLoad tells whether the app on a virtual clock is still busy — so
// that a stable settle does not take an unchanged screen for a settled
// one while the app has not yet drawn the instant it was moved to.
//
// On a virtual clock the app's picture is a function of its time and its
// input, and the app's time stands still during a settle: once it has
// drawn the current instant it stays drawn. The screen being unchanged
// for the settle's duration is not enough to say it has: on a busy
// machine the app may not have run at all in that time (a process
// waiting for a CPU, a Python starting up), and the frame taken would be
// the previous instant's (the flake this fixes: a replay's frame 58 px
// off the recording's). So the app is busy while any of its processes
// is running, waiting to run or in an uninterruptible wait (state R or
// D), or spent more than half the time since the last look on a CPU or
// waiting for one (/proc/PID/schedstat); a stable settle counts its
// duration only from the last look that found it idle.
//
// The app's processes are those whose environment names its clock file
// (FAKETIME_TIMESTAMP_FILE, which the guest puts in the app's
// environment and every child inherits), wherever they were reparented.
type appLoad struct {
	marker []byte               // "FAKETIME_TIMESTAMP_FILE=…\x00"
	known  map[procKey]bool     // process → is the app's
	busyNS map[procKey]uint64   // the app's threads' CPU + run-queue time at the last look (key: thread id, process start)
	last   time.Time            // the last look
	proc   string               // /proc (tests)
	seen   map[procKey]struct{} // scratch
}

type procKey struct {
	pid   int
	start uint64 // start time (clock ticks after boot): a reused pid is another process
}

func newAppLoad(clockFile string) *appLoad {
	return &appLoad{
		marker: []byte("FAKETIME_TIMESTAMP_FILE=" + clockFile + "\x00"),
		known:  map[procKey]bool{},
		busyNS: map[procKey]uint64{},
		proc:   "/proc",
		seen:   map[procKey]struct{}{},
	}
}

// busy looks at the app's processes now: true while it is working or
// waiting to work (see appLoad).
func (l *appLoad) busy() bool {
	now := time.Now()
	elapsed := now.Sub(l.last)
	first := l.last.IsZero()
	l.last = now
	d, err := os.Open(l.proc)
	if err != nil {
		return false
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	clear(l.seen)
	live := make(map[procKey]struct{}, len(names))
	busy := false
	var delta uint64
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		_, start, ok := l.stat(name)
		if !ok {
			continue
		}
		k := procKey{pid, start}
		live[k] = struct{}{}
		app, ok := l.known[k]
		if !ok {
			env, _ := os.ReadFile(l.proc + "/" + name + "/environ")
			app = bytes.Contains(append([]byte{0}, env...), append([]byte{0}, l.marker...))
			l.known[k] = app
		}
		if !app {
			continue
		}
		// Every thread: /proc/PID/stat and schedstat are the main
		// thread's alone.
		tids, _ := os.ReadDir(l.proc + "/" + name + "/task")
		for _, t := range tids {
			tid, err := strconv.Atoi(t.Name())
			if err != nil {
				continue
			}
			tk := procKey{tid, start}
			l.seen[tk] = struct{}{}
			tpath := name + "/task/" + t.Name()
			if st, _, ok := l.stat(tpath); ok && (st == "R" || st == "D") {
				busy = true
			}
			ns, ok := l.schedstat(tpath)
			if !ok {
				continue
			}
			prev, had := l.busyNS[tk]
			if had && ns >= prev {
				delta += ns - prev
			} else if !had && !first {
				busy = true // a thread that appeared since the last look: starting
			}
			l.busyNS[tk] = ns
		}
	}
	for k := range l.known {
		if _, ok := live[k]; !ok {
			delete(l.known, k)
		}
	}
	for k := range l.busyNS {
		if _, ok := l.seen[k]; !ok {
			delete(l.busyNS, k)
		}
	}
	if !first && time.Duration(delta) > elapsed/2 {
		busy = true
	}
	return busy || first
}

// stat reads a process's state and start time from /proc/PID/stat.
func (l *appLoad) stat(pid string) (state string, start uint64, ok bool) {
	data, err := os.ReadFile(l.proc + "/" + pid + "/stat")
	if err != nil {
		return "", 0, false
	}
	// After the command (which may hold spaces and parentheses): state
	// (field 3) … starttime (field 22).
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return "", 0, false
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 20 {
		return "", 0, false
	}
	start, err = strconv.ParseUint(f[19], 10, 64)
	return f[0], start, err == nil
}

// schedstat is a process's time on a CPU plus its time waiting for one,
// in ns (/proc/PID/schedstat's first two fields).
func (l *appLoad) schedstat(pid string) (uint64, bool) {
	data, err := os.ReadFile(l.proc + "/" + pid + "/schedstat")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(data))
	if len(f) < 2 {
		return 0, false
	}
	run, err1 := strconv.ParseUint(f[0], 10, 64)
	wait, err2 := strconv.ParseUint(f[1], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return run + wait, true
}
