package grade

import (
	"context"
	"image/color"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// BenchmarkCheck is the grader's time per check kind on small, typical
// files (a 100-row sheet, a 1280×800 screenshot), beside the reference of
// reading each file alone (read-*: os.ReadFile, what any check costs at
// least).
func BenchmarkCheck(b *testing.B) {
	dir := b.TempDir()
	var rows [][]odsCell
	xcells := map[string]any{}
	var csv strings.Builder
	for i := range 100 {
		rows = append(rows, []odsCell{{text: "item"}, {num: num(float64(i)), text: "x"}})
		xcells["A"+itoa(i+1)] = "item"
		xcells["B"+itoa(i+1)] = i
		csv.WriteString("item," + itoa(i) + "\n")
	}
	write(b, dir, map[string][]byte{
		"files/a.txt":  []byte(strings.Repeat("some text\n", 100)),
		"files/a.json": []byte(`{"a": {"b": [1, 2, 3]}}`),
		"files/s.csv":  []byte(csv.String()),
		"files/s.ods":  makeODS(b, map[string][][]odsCell{"S": rows}, []string{"S"}),
		"files/s.xlsx": makeXLSX(b, map[string]map[string]any{"S": xcells}, []string{"S"}),
		"files/a.png":  makePNG(b, 1280, 800, color.NRGBA{R: 10, G: 20, B: 30, A: 255}, 100),
		"want.png":     makePNG(b, 1280, 800, color.NRGBA{R: 10, G: 20, B: 30, A: 255}, 0),
		"want.csv":     []byte(csv.String()),
		"check.sh":     []byte("#!/bin/sh\necho '{\"outcome\": \"verified\", \"score\": 1}'\n"),
	})
	for _, bb := range []struct{ name, spec string }{
		{"exists", "{exists: a.txt}"},
		{"text", "{text: a.txt, regex: 'some\\s+text', normalize: [case]}"},
		{"json", "{json: a.json, path: 'a.b[2]', equals: 3}"},
		{"table-csv-cell", "{table: s.csv, cell: B100, equals: 99}"},
		{"table-ods-cell", "{table: s.ods, cell: B100, equals: 99}"},
		{"table-xlsx-cell", "{table: s.xlsx, cell: B100, equals: 99}"},
		{"table-ods-sheet", "{table: s.ods, expected: want.csv}"},
		{"image-1280x800", "{image: a.png, expected: want.png}"},
		{"command", "{command: [./check.sh]}"},
	} {
		b.Run(bb.name, func(b *testing.B) {
			s := loadSpec(b, dir, "- "+bb.spec+"\n")
			for b.Loop() {
				if g := s.Grade(context.Background(), filepath.Join(dir, "files"), dir); g.Outcome != "verified" {
					b.Fatalf("%+v", g)
				}
			}
		})
	}
	for _, f := range []string{"a.txt", "s.ods", "s.xlsx", "a.png"} {
		b.Run("read-"+f, func(b *testing.B) {
			for b.Loop() {
				if _, err := os.ReadFile(filepath.Join(dir, "files", f)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
