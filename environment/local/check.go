package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/environment/guestenv"
)

var _ environment.Checker = (*Backend)(nil)

// Check implements environment.Checker: what the local backend needs
// (bubblewrap that can make user namespaces, the host's Xvfb and Openbox,
// a guest binary) and how it will bound sandboxes here.
func (*Backend) Check(ctx context.Context, cfg environment.Config) []environment.Check {
	var out []environment.Check
	b := findBwrap()
	switch {
	case b.path == "":
		out = append(out, environment.Check{Name: "bubblewrap", Detail: "bwrap is not installed", Fix: "apt-get install bubblewrap"})
	case b.err != nil:
		out = append(out, environment.Check{Name: "bubblewrap", Detail: b.err.Error(), Fix: "install bubblewrap 0.5 or newer (Debian 12: apt-get install bubblewrap)"})
	default:
		c := environment.Check{Name: "bubblewrap", OK: true, Detail: b.path + " " + b.version}
		if !b.disableUserns {
			c.Detail += "; older than 0.8, so sandboxes may create nested user namespaces"
			c.Fix = "bubblewrap 0.8 or newer adds --disable-userns"
		}
		out = append(out, c)
		if err := smokeTest(ctx, b); err != nil {
			out = append(out, environment.Check{Name: "user namespaces", Detail: strings.TrimPrefix(err.Error(), environment.ErrUnavailable.Error()+": "),
				Fix: "allow unprivileged user namespaces: sysctl -w user.max_user_namespaces=15000 (Debian ≤ 10: kernel.unprivileged_userns_clone=1; Ubuntu ≥ 23.10: kernel.apparmor_restrict_unprivileged_userns=0 or an AppArmor profile for bwrap)"})
		} else {
			out = append(out, environment.Check{Name: "user namespaces", OK: true, Detail: "bubblewrap made a test sandbox (user, PID, IPC, network, UTS namespaces)"})
		}
	}
	for _, prog := range []string{"Xvfb", "openbox"} {
		p, err := hostProgram(prog)
		if err != nil {
			pkg := strings.ToLower(prog)
			detail := "not installed; the sandbox uses the host's"
			if prog == "openbox" {
				detail += " (without it apps run with no window manager: no title bars, no focus handling)"
			}
			out = append(out, environment.Check{Name: prog, Detail: detail, Fix: "apt-get install " + pkg})
			continue
		}
		out = append(out, environment.Check{Name: prog, OK: true, Detail: p})
	}
	if b.err == nil {
		out = append(out, environment.Check{Name: "start-up caches", OK: true, Detail: startupCaches(ctx, b).describe()})
	}
	if fi, err := os.Stat("/usr/share/fonts/X11/misc/fonts.dir"); err == nil && !fi.IsDir() {
		out = append(out, environment.Check{Name: "core X fonts", OK: true, Detail: "installed (xfonts-base)"})
	} else {
		out = append(out, environment.Check{Name: "core X fonts", OK: true, Detail: "not installed: older X11 apps (xcalc, xterm menus) fall back to other fonts and lay out differently than in the Docker image", Fix: "apt-get install xfonts-base"})
	}
	if bin, err := GuestBinary(cfg.GuestBinary); err != nil {
		out = append(out, environment.Check{Name: "guest binary", Detail: trimErr(err), Fix: "make build, or set AGENTBOX_GUEST_BINARY"})
	} else {
		c := environment.Check{Name: "guest binary", OK: true, Detail: bin + "; sandboxes mount a copy from " + guestenv.StageDir()}
		if uid, _, dropped := hostIdentity(); dropped {
			c.Detail += fmt.Sprintf("; sandboxes run as host uid %d (agentbox runs as root)", uid)
		}
		c.Detail += guestenv.SiblingNote(cfg.GuestBinary)
		out = append(out, c)
	}
	res := cfg.Resources.WithDefaults()
	switch p := cgroups(); {
	case p.usable():
		c := environment.Check{Name: "limits", OK: true,
			Detail: p.where() + ": memory (no swap), processes and CPU per sandbox"}
		if p.freezes() {
			c.Detail += "; freezing works"
		} else {
			c.Detail += "; the freezer controller is not mounted, so sandboxes cannot be frozen (--freeze-while-thinking)"
			c.Fix = "mount the cgroup v1 freezer at " + filepath.Join(cgroupRoot, v1Freezer)
		}
		out = append(out, c)
	default:
		out = append(out, environment.Check{Name: "limits",
			Detail: describeRlimits(res, p.reason) + "; run, eval, replay, mcp and serve refuse --memory and --cpus here (exit 2) unless given --allow-unbounded-limits",
			Fix:    UnboundedFix})
	}
	if os.Getenv("DISPLAY") != "" || os.Getenv("DBUS_SESSION_BUS_ADDRESS") != "" {
		out = append(out, environment.Check{Name: "host session", OK: true, Detail: "DISPLAY / D-Bus are set here; sandboxes see neither (environment cleared, own /tmp and network namespace)"})
	}
	return out
}
