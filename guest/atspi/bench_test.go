package atspi_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/observe"
)

// The figures of issue 19: how long a read of the tree takes for a
// dialog and for a larger GTK window (p50, p95), and the memory the bus
// adds. Run with
//
//	go test -run '^$' -bench Tree -benchtime 200x ./guest/atspi/
//
// Not timed tests: they report, they do not judge.

var ok = action.Selector{Role: "push button", Name: "OK"}

func BenchmarkTreeZenityDialog(b *testing.B) {
	benchTree(b, ok, "zenity", "--entry", "--title=Name please", "--text=Your name:")
}

// BenchmarkTreeZenityList reads a larger GTK window: a list of 60 rows of
// three columns (a table with its headers and showing cells).
func BenchmarkTreeZenityList(b *testing.B) {
	args := []string{"--list", "--title=Many", "--width=700", "--height=560", "--column=Name", "--column=Kind", "--column=Size"}
	for i := range 60 {
		args = append(args, fmt.Sprintf("item %d", i), "kind", strconv.Itoa(i*7))
	}
	benchTree(b, ok, "zenity", args...)
}

// BenchmarkTreeCalc reads LibreOffice Calc's window (its GTK3 plugin):
// menus with hundreds of closed items, and a sheet whose visible cells
// are read through its Table interface.
func BenchmarkTreeCalc(b *testing.B) {
	benchTreeEnv(b, action.Selector{Role: "table cell", Name: "A1"}, []string{"SAL_USE_VCLPLUGIN=gtk3"}, "localc", "--norestore", "--nologo")
}

func benchTree(b *testing.B, ready action.Selector, name string, args ...string) {
	benchTreeEnv(b, ready, nil, name, args...)
}

func benchTreeEnv(b *testing.B, ready action.Selector, env []string, name string, args ...string) {
	testenv.Require(b, testenv.Programs(name))
	d := startDesktop(b)
	d.env = env
	d.app(b, name, args...)
	d.waitTree(b, ready.String(), func(tr *observe.Tree) bool {
		_, err := tr.Find(ready)
		return err == nil
	})
	var times []time.Duration
	var elements, calls, cut int
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		tr, err := d.bus.Tree(b.Context(), observe.TreeLimits{})
		times = append(times, time.Since(t0))
		if err != nil {
			b.Fatal(err)
		}
		elements, calls = len(tr.Elements), tr.Calls
		if len(tr.Cut) > 0 {
			cut++
		}
	}
	b.StopTimer()
	slices.Sort(times)
	q := func(p float64) float64 { return float64(times[int(p*float64(len(times)-1))].Microseconds()) / 1000 }
	b.ReportMetric(q(0.5), "p50_ms")
	b.ReportMetric(q(0.95), "p95_ms")
	b.ReportMetric(float64(elements), "elements")
	b.ReportMetric(float64(calls), "calls")
	b.ReportMetric(float64(cut), "cut_reads")
	b.ReportMetric(float64(busRSS(d.bus.PIDs()))/1024, "bus_rss_MiB")
}

// busRSS sums the resident memory (KiB) of the bus's processes: those in
// the process groups of the session bus and the launcher (the launcher's
// accessibility bus and the registry it activates).
func busRSS(groups []int) int {
	ents, _ := os.ReadDir("/proc")
	total := 0
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(stat)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		if len(f) < 3 {
			continue
		}
		pgrp, _ := strconv.Atoi(f[2])
		if !slices.Contains(groups, pgrp) {
			continue
		}
		status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		for _, l := range strings.Split(string(status), "\n") {
			if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
				kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
				total += kb
			}
		}
	}
	return total
}
