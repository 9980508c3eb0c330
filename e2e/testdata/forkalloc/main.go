// Command forkalloc is the app of the memory-limit tests: it forks
// children that each allocate anonymous memory in steps up to a ceiling
// and then hold it, and reports what they held at once. It stays safe for
// the machine when no limit bounds it: each child stops at its ceiling, so
// the most it can hold is children × ceiling.
//
//	forkalloc CHILDREN CEILING_MB STEP_MB
//
// Each child reports on a pipe after every step ("HELD MB"), and "FULL MB"
// at its ceiling. Once every child is full or gone (or after a minute),
// the parent prints one line
//
//	FORKALLOC {"children":[{"held_mb":…,"full":…,"killed":…}],"held_mb":…,"killed":…}
//
// where the top-level held_mb is what the children alive then held at
// once, then "FORKALLOC DONE", ends the children, and stays alive (so the
// run, not the app, decides when it ends).
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type child struct {
	HeldMB int    `json:"held_mb"`
	Full   bool   `json:"full"`
	Killed bool   `json:"killed"` // ended by SIGKILL (the OOM killer)
	Exit   string `json:"exit,omitempty"`
}

func main() {
	if len(os.Args) == 4 && os.Args[1] == "child" {
		ceiling, _ := strconv.Atoi(os.Args[2])
		step, _ := strconv.Atoi(os.Args[3])
		allocate(ceiling, step)
		return
	}
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: forkalloc CHILDREN CEILING_MB STEP_MB")
		os.Exit(2)
	}
	n, err1 := strconv.Atoi(os.Args[1])
	ceiling, err2 := strconv.Atoi(os.Args[2])
	step, err3 := strconv.Atoi(os.Args[3])
	if err1 != nil || err2 != nil || err3 != nil || n < 1 || n > 16 || ceiling < 1 || ceiling > 1024 || step < 1 {
		fmt.Fprintln(os.Stderr, "forkalloc: want 1-16 children, a ceiling of 1-1024 MB and a positive step")
		os.Exit(2)
	}
	type update struct {
		i    int
		line string // "" when the child's pipe closed
	}
	updates := make(chan update)
	kids := make([]child, n)
	cmds := make([]*exec.Cmd, n)
	for i := range n {
		cmd := exec.Command("/proc/self/exe", "child", os.Args[2], os.Args[3])
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			fmt.Println("FORKALLOC-ERROR", err)
			continue
		}
		if err := cmd.Start(); err != nil {
			fmt.Println("FORKALLOC-ERROR", err)
			continue
		}
		cmds[i] = cmd
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				updates <- update{i, sc.Text()}
			}
			updates <- update{i, ""}
		}()
	}
	open := 0
	for _, c := range cmds {
		if c != nil {
			open++
		}
	}
	deadline := time.After(time.Minute)
	full := 0
wait:
	for open > 0 && full < open {
		select {
		case u := <-updates:
			k := &kids[u.i]
			f := strings.Fields(u.line)
			switch {
			case u.line == "":
				open--
				if k.Full {
					full--
				}
				st := waitChild(cmds[u.i])
				k.Killed, k.Exit = st == "signal: killed", st
				k.HeldMB, k.Full = 0, false
			case len(f) == 2 && (f[0] == "HELD" || f[0] == "FULL"):
				k.HeldMB, _ = strconv.Atoi(f[1])
				if f[0] == "FULL" && !k.Full {
					k.Full = true
					full++
				}
			}
		case <-deadline:
			break wait
		}
	}
	held, killed := 0, 0
	for _, k := range kids {
		held += k.HeldMB
		if k.Killed {
			killed++
		}
	}
	data, _ := json.Marshal(map[string]any{"children": kids, "held_mb": held, "killed": killed})
	fmt.Printf("FORKALLOC %s\n", data)
	for _, c := range cmds {
		if c != nil && c.ProcessState == nil {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	}
	fmt.Println("FORKALLOC DONE")
	for {
		time.Sleep(time.Hour)
	}
}

// waitChild reaps a child whose pipe closed and says how it ended.
func waitChild(c *exec.Cmd) string {
	err := c.Wait()
	if err == nil {
		return "exit 0"
	}
	return err.Error()
}

// allocate maps anonymous memory step by step, touching every page so it
// is really held, reporting after each step; at the ceiling it holds it
// until killed.
func allocate(ceiling, step int) {
	var held [][]byte
	mb := 0
	for mb < ceiling {
		n := min(step, ceiling-mb)
		b, err := syscall.Mmap(-1, 0, n<<20, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
		if err != nil {
			fmt.Fprintf(os.Stderr, "forkalloc child: mmap after %d MB: %v\n", mb, err)
			os.Exit(3)
		}
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		held = append(held, b)
		mb += n
		if mb < ceiling {
			fmt.Printf("HELD %d\n", mb)
		}
	}
	fmt.Printf("FULL %d\n", mb)
	for {
		time.Sleep(time.Hour)
		_ = held
	}
}
