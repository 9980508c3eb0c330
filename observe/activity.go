package observe

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Activity kinds: what the trusted observer (the guest, outside the app's
// reach) saw the app do since the previous checkpoint.
const (
	// ActExec is a process seen running a program: a new process, or a
	// known one whose program changed (an exec). Argv is its command line.
	ActExec = "exec"
	// ActExit is a process seen gone. Exit holds its status when the
	// observer saw it (the app's own process; a process caught as a
	// zombie); otherwise the status is unknown.
	ActExit = "exit"
	// ActFile is a path below a watched directory that changed: Ops says
	// how (created, written, renamed, deleted), coalesced per path per
	// checkpoint; SHA256 and Size are the file's at the checkpoint.
	ActFile = "file"
	// ActUnseen counts processes (or threads) that began and ended between
	// two looks of the process observer, which polls: N of them, their
	// programs unknown. Never silent.
	ActUnseen = "unseen"
	// ActOverflow says events were lost or left out (Reason says which:
	// the kernel's queue overflowed, a directory could not be watched,
	// the checkpoint's bound was reached); N counts them where known.
	ActOverflow = "overflow"
)

// ActivityKinds are the kinds in the order the docs list them.
var ActivityKinds = []string{ActExec, ActExit, ActFile, ActUnseen, ActOverflow}

// File operations of an ActFile event.
const (
	OpCreated = "created"
	OpWritten = "written"
	OpRenamed = "renamed"
	OpDeleted = "deleted"
)

// FileOps are the file operations.
var FileOps = []string{OpCreated, OpWritten, OpRenamed, OpDeleted}

// ActivityEvent is one thing the trusted observer recorded.
type ActivityEvent struct {
	// Time is when it was seen (for a file: first seen in the checkpoint).
	Time time.Time `json:"time"`
	Kind string    `json:"kind"`
	// PID and PPID are the process's, in the sandbox's PID namespace.
	PID  int `json:"pid,omitempty"`
	PPID int `json:"ppid,omitempty"`
	// Argv is the process's command line (bounded; Cut says it was cut).
	Argv []string `json:"argv,omitempty"`
	// Exit is how a process ended, when the observer saw its status.
	Exit *Exit `json:"exit,omitempty"`
	// Path is a file's path: "~/…" below the app's home, else absolute.
	// From is where a renamed file came from.
	Path string   `json:"path,omitempty"`
	From string   `json:"from,omitempty"`
	Ops  []string `json:"ops,omitempty"`
	// Dir says the path is a directory.
	Dir bool `json:"dir,omitempty"`
	// SHA256 (hex) and Size are a written file's content at the
	// checkpoint; NotHashed says why a written file has no hash (gone,
	// larger than the bound, the checkpoint's hashing budget spent).
	SHA256    string `json:"sha256,omitempty"`
	Size      int64  `json:"size,omitempty"`
	NotHashed string `json:"not_hashed,omitempty"`
	// N counts what an unseen or overflow event stands for.
	N int64 `json:"n,omitempty"`
	// Reason says why events were lost (overflow).
	Reason string `json:"reason,omitempty"`
	// Cut says Argv was shortened to its bound.
	Cut bool `json:"cut,omitempty"`
}

// Has reports whether a file event includes op.
func (e ActivityEvent) Has(op string) bool {
	for _, o := range e.Ops {
		if o == op {
			return true
		}
	}
	return false
}

// String is one line for people and models: "exec [sh -c …] pid 12",
// "file ~/out.txt created, written (12 bytes, sha256 3a7b…)".
func (e ActivityEvent) String() string {
	switch e.Kind {
	case ActExec:
		return fmt.Sprintf("exec %s (pid %d)", quoteArgv(e.Argv), e.PID)
	case ActExit:
		s := fmt.Sprintf("exit %s (pid %d)", quoteArgv(e.Argv), e.PID)
		if e.Exit != nil {
			return s + ": " + e.Exit.String()
		}
		return s + ": status unknown"
	case ActFile:
		s := "file " + e.Path
		if e.Dir {
			s += "/"
		}
		if e.From != "" {
			s += " (from " + e.From + ")"
		}
		s += " " + strings.Join(e.Ops, ", ")
		switch {
		case e.SHA256 != "":
			s += fmt.Sprintf(" (%d bytes, sha256 %.12s…)", e.Size, e.SHA256)
		case e.NotHashed != "":
			s += " (not hashed: " + e.NotHashed + ")"
		}
		return s
	case ActUnseen:
		return fmt.Sprintf("unseen: %d short-lived processes or threads began and ended between two looks", e.N)
	case ActOverflow:
		if e.N > 0 {
			return fmt.Sprintf("overflow: %s (%d lost)", e.Reason, e.N)
		}
		return "overflow: " + e.Reason
	}
	return e.Kind
}

func quoteArgv(argv []string) string {
	if len(argv) == 0 {
		return "[]"
	}
	q := make([]string, len(argv))
	for i, a := range argv {
		if a == "" || strings.ContainsAny(a, " \t\n\"'\\") {
			q[i] = fmt.Sprintf("%q", a)
		} else {
			q[i] = a
		}
	}
	return "[" + strings.Join(q, " ") + "]"
}

// Problem says what is wrong with a recorded event ("": nothing):
// trace.Validate's check of each one.
func (e ActivityEvent) Problem() string {
	switch e.Kind {
	case ActExec, ActExit:
		if e.PID <= 0 {
			return fmt.Sprintf("%s without a pid", e.Kind)
		}
	case ActFile:
		if e.Path == "" {
			return "file event without a path"
		}
		if len(e.Ops) == 0 {
			return fmt.Sprintf("file event %s without an operation", e.Path)
		}
		for _, op := range e.Ops {
			if !slices.Contains(FileOps, op) {
				return fmt.Sprintf("file event %s: unknown operation %q", e.Path, op)
			}
		}
		if e.SHA256 != "" && len(e.SHA256) != 64 {
			return fmt.Sprintf("file event %s: sha256 %q is not 64 hex digits", e.Path, e.SHA256)
		}
	case ActUnseen:
		if e.N <= 0 {
			return "unseen event without a count"
		}
	case ActOverflow:
		if e.Reason == "" {
			return "overflow event without a reason"
		}
	default:
		return fmt.Sprintf("unknown kind %q (known: %s)", e.Kind, strings.Join(ActivityKinds, ", "))
	}
	return ""
}
