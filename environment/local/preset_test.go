package local

import (
	"encoding/xml"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/environment"
)

// xcdSettings reads the settings of images/Dockerfile.office's
// agentbox.xcd (the lines its printf writes) as "/package.name/node/prop"
// → value.
func xcdSettings(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile("../../images/Dockerfile.office")
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	i, j := strings.Index(s, "'<oor:data"), strings.Index(s, "'</oor:data>'")
	if i < 0 || j < 0 {
		t.Fatal("images/Dockerfile.office: no agentbox.xcd (printf '<oor:data …' … '</oor:data>')")
	}
	var doc strings.Builder
	for _, m := range regexp.MustCompile(`'([^']*)'`).FindAllStringSubmatch(s[i:j+len("'</oor:data>'")], -1) {
		doc.WriteString(m[1])
	}
	var x struct {
		Components []struct {
			Package string `xml:"package,attr"`
			Name    string `xml:"name,attr"`
			Nodes   []struct {
				Name  string `xml:"name,attr"`
				Props []struct {
					Name  string `xml:"name,attr"`
					Value string `xml:"value"`
				} `xml:"prop"`
			} `xml:"node"`
		} `xml:"component-data"`
	}
	if err := xml.Unmarshal([]byte(doc.String()), &x); err != nil {
		t.Fatalf("images/Dockerfile.office's agentbox.xcd: %v", err)
	}
	out := map[string]string{}
	for _, c := range x.Components {
		for _, n := range c.Nodes {
			for _, p := range n.Props {
				out["/"+c.Package+"."+c.Name+"/"+n.Name+"/"+p.Name] = p.Value
			}
		}
	}
	return out
}

// TestLibreOfficePresetMatchesImage: the profile the local backend writes
// for LibreOffice says what the office image's configuration layer says,
// setting for setting.
func TestLibreOfficePresetMatchesImage(t *testing.T) {
	want := xcdSettings(t)
	if len(want) == 0 {
		t.Fatal("images/Dockerfile.office's agentbox.xcd has no settings")
	}
	var x struct {
		Items []struct {
			Path string `xml:"path,attr"`
			Prop struct {
				Name  string `xml:"name,attr"`
				Value string `xml:"value"`
			} `xml:"prop"`
		} `xml:"item"`
	}
	if err := xml.Unmarshal([]byte(libreOfficePreset), &x); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, it := range x.Items {
		got[it.Path+"/"+it.Prop.Name] = it.Prop.Value
	}
	if !maps.Equal(got, want) {
		t.Errorf("the local backend's LibreOffice preset:\n%v\nthe office image's agentbox.xcd:\n%v", got, want)
	}
}

// TestPreset: LibreOffice's launchers get the profile, by their base
// name; other apps nothing.
func TestPreset(t *testing.T) {
	for _, c := range []struct {
		command string
		files   []string
	}{
		{"localc", []string{libreOfficeProfile}},
		{"/usr/bin/soffice", []string{libreOfficeProfile}},
		{"lowriter", []string{libreOfficeProfile}},
		{"mousepad", nil},
		{"chromium", nil},
	} {
		spec := environment.LaunchSpec{App: &app.Bundle{Manifest: app.Manifest{Command: c.command}}}
		var got []string
		for _, f := range preset(spec).Files {
			got = append(got, f.Path)
		}
		if !slices.Equal(got, c.files) {
			t.Errorf("%s: preset files %v, want %v", c.command, got, c.files)
		}
	}
}
