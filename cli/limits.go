package cli

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/replay"
	"github.com/codegirl-games/agentbox/trace"
)

// The sandbox's size and the run's bounds follow one set of rules, whether
// they come from flags (run, eval) or from a recorded run.json (replay): a
// trace is input, and a crafted one must not get a sandbox no flag could
// ask for (a million processes, 8 TB of memory).
const (
	minCPUs     = 0.01
	maxCPUs     = 1024
	minMemoryMB = 16
	maxMemoryMB = 1 << 20 // 1 TiB
	maxPIDs     = 65536
	minTmpfsMB  = 1
	maxTmpfsMB  = 1 << 20
	maxShmMB    = 1 << 20
	maxLogCap   = 4 << 30

	maxRecordedMS    = float64(math.MaxInt64/2) / float64(time.Millisecond)
	recordedRunField = trace.RunFile + " "
)

// limitNames names each limit in errors: a flag, or a field of run.json.
type limitNames struct {
	CPUs, Memory, PIDs, Tmpfs, Shm string
}

var flagNames = limitNames{CPUs: "--cpus", Memory: "--memory", PIDs: "--pids", Tmpfs: "--tmpfs", Shm: "shm"}

var runJSONNames = limitNames{
	CPUs:   recordedRunField + "environment.limits.cpus",
	Memory: recordedRunField + "environment.limits.memory_mb",
	PIDs:   recordedRunField + "environment.limits.pids",
	Tmpfs:  recordedRunField + "environment.limits.tmpfs_mb",
	Shm:    recordedRunField + "environment.limits.shm_mb",
}

// checkResources applies the rules to a sandbox's limits, and
// environment.Resources.Validate. Out of range is a usage error naming
// where the value came from. /dev/shm has no flag:
// zero there is its default.
func checkResources(r environment.Resources, names limitNames) error {
	if r.ShmMB == 0 {
		r.ShmMB = environment.Resources{}.WithDefaults().ShmMB
	}
	if r.PIDs > 0 && r.PIDs < environment.MinPIDs {
		// Below it the sandbox crashes as it starts: say why, not a range.
		return usageErrorf("%s is %d: too few: %s", names.PIDs, r.PIDs, environment.PIDsWhy)
	}
	for _, c := range []struct {
		name   string
		v      float64
		lo, hi float64
		unit   string
	}{
		{names.CPUs, r.CPUs, minCPUs, maxCPUs, ""},
		{names.Memory, float64(r.MemoryMB), minMemoryMB, maxMemoryMB, " MiB"},
		{names.PIDs, float64(r.PIDs), environment.MinPIDs, maxPIDs, ""},
		{names.Tmpfs, float64(r.TmpfsMB), minTmpfsMB, maxTmpfsMB, " MiB"},
		{names.Shm, float64(r.ShmMB), 1, maxShmMB, " MiB"},
	} {
		if err := checkRange(c.name, c.v, c.lo, c.hi, c.unit); err != nil {
			return err
		}
	}
	// What every backend checks too: tmpfs and shm below memory.
	if err := r.Validate(); err != nil {
		return usageErrorf("%s and %s: %v", names.Tmpfs, names.Memory, err)
	}
	return nil
}

// checkRange is lo ≤ v ≤ hi (NaN is out of range).
func checkRange(name string, v, lo, hi float64, unit string) error {
	if !(v >= lo && v <= hi) {
		return usageErrorf("%s is %s%s: want %s to %s%s", name, num(v), unit, num(lo), num(hi), unit)
	}
	return nil
}

func num(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// recordedEnv is the sandbox a replay makes: the recording's
// (replay.EnvFromRun), with every value read from run.json held to the
// rules of the flag that set it.
func recordedEnv(run trace.Run) (environment.Config, error) {
	// The raw numbers first: EnvFromRun converts them to int.
	for _, k := range []struct {
		key      string
		integral bool
	}{{"cpus", false}, {"memory_mb", true}, {"pids", true}, {"tmpfs_mb", true}, {"shm_mb", true}} {
		raw, ok := run.Env.Limits[k.key]
		if !ok || raw == nil {
			continue // the default, as when it was recorded
		}
		v, isNum := raw.(float64)
		name := recordedRunField + "environment.limits." + k.key
		switch {
		case !isNum:
			return environment.Config{}, usageErrorf("%s is %v: not a number", name, raw)
		case k.integral && v != math.Trunc(v):
			return environment.Config{}, usageErrorf("%s is %s: not a whole number", name, num(v))
		case !(v >= 0 && v <= 1<<40):
			return environment.Config{}, usageErrorf("%s is %s: out of range", name, num(v))
		}
	}
	env := replay.EnvFromRun(run)
	// Zero is a limit the trace does not record: the default, then as now.
	env.Resources = env.Resources.WithDefaults()
	if err := checkResources(env.Resources, runJSONNames); err != nil {
		return env, err
	}
	env.Screen = env.Screen.OrDefault()
	if err := env.Screen.Validate(); err != nil {
		return env, usageErrorf("%senvironment.screen %v: %v", recordedRunField, env.Screen, err)
	}
	if s := run.Settings; s != nil {
		for _, c := range []struct {
			name string
			v    float64
		}{{"settings.timeout_ms", s.TimeoutMS}, {"settings.ready_timeout_ms", s.ReadyTimeoutMS}} {
			if err := checkRange(recordedRunField+c.name, c.v, 0, maxRecordedMS, ""); err != nil {
				return env, err
			}
		}
		if err := checkRange(recordedRunField+"settings.log_cap", float64(s.LogCap), 0, maxLogCap, " bytes"); err != nil {
			return env, err
		}
	}
	if err := checkRange(recordedRunField+"duration_ms", run.DurationMS, 0, maxRecordedMS, ""); err != nil {
		return env, err
	}
	return env, nil
}

// describeSandbox says what a sandbox will be given, for replay to print.
func describeSandbox(env environment.Config, logCap int64) string {
	r := env.Resources
	s := fmt.Sprintf("screen %dx%d, %s CPU, %d MiB memory, %d processes, %d MiB /tmp, %d MiB /dev/shm",
		env.Screen.Width, env.Screen.Height, num(r.CPUs), r.MemoryMB, r.PIDs, r.TmpfsMB, r.ShmMB)
	if logCap > 0 {
		s += ", log cap " + humanBytes(logCap)
	}
	if env.NoWM {
		s += ", no window manager"
	}
	if env.Image != "" {
		s += ", image " + env.Image
	}
	if env.Runtime != "" {
		s += ", OCI runtime " + env.Runtime
	}
	return s
}
