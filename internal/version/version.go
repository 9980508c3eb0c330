// Package version holds agentbox's version, set at link time:
//
//	go build -ldflags "-X github.com/codegirl-games/agentbox/internal/version.Version=v0.1.0"
package version

import "runtime/debug"

// Version is the agentbox version.
var Version = "dev"

func init() {
	if Version != "dev" {
		return
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			Version = v
			return
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				Version = "dev-" + s.Value[:12]
			}
		}
	}
}
