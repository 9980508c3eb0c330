package osworld

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestProgramsAreTheOfficeImages: every program a converted task can run
// is one the office image carries (its APPS, images/Dockerfile.office):
// a name the image lacks is an app that never starts (limpress for
// loimpress was one).
func TestProgramsAreTheOfficeImages(t *testing.T) {
	data, err := os.ReadFile("../../images/Dockerfile.office")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^ARG APPS="([^"]*)"`).FindSubmatch(data)
	if m == nil {
		t.Fatal(`images/Dockerfile.office: no ARG APPS="…"`)
	}
	apps := map[string]bool{}
	for _, a := range strings.Fields(string(m[1])) {
		apps[a] = true
	}
	for what, table := range map[string]map[string]string{"relatedPrograms": relatedPrograms, "programs": programs, "byExtension": byExtension} {
		for k, prog := range table {
			if !apps[prog] {
				t.Errorf("%s[%q] = %q: not among the office image's apps %s", what, k, prog, m[1])
			}
		}
	}
}
