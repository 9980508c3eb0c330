package grade

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"html"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xuri/excelize/v2"

	"github.com/codegirl-games/agentbox/trace"
)

// odsCell is a cell of a test ODS: a float when num is set, else text;
// rep repeats it.
type odsCell struct {
	text  string
	num   *float64
	rep   int
	cover bool
}

func num(f float64) *float64 { return &f }

// makeODS writes an ODS archive the way LibreOffice lays one out: the
// mimetype first and stored, content.xml with tables, repeated rows and
// cells, trailing empty repeats.
func makeODS(t testing.TB, sheets map[string][][]odsCell, order []string) []byte {
	t.Helper()
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>
<office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" office:version="1.3"><office:body><office:spreadsheet>`)
	for _, name := range order {
		fmt.Fprintf(&b, `<table:table table:name="%s"><table:table-column table:number-columns-repeated="1024"/>`, html.EscapeString(name))
		for _, row := range sheets[name] {
			b.WriteString(`<table:table-row>`)
			for _, c := range row {
				tag := "table:table-cell"
				if c.cover {
					tag = "table:covered-table-cell"
				}
				rep := ""
				if c.rep > 1 {
					rep = fmt.Sprintf(` table:number-columns-repeated="%d"`, c.rep)
				}
				switch {
				case c.num != nil:
					fmt.Fprintf(&b, `<%s office:value-type="float" office:value="%v"%s><text:p>%s</text:p></%s>`, tag, *c.num, rep, html.EscapeString(c.text), tag)
				case c.text != "":
					fmt.Fprintf(&b, `<%s office:value-type="string"%s><text:p>%s</text:p></%s>`, tag, rep, html.EscapeString(c.text), tag)
				default:
					fmt.Fprintf(&b, `<%s%s/>`, tag, rep)
				}
			}
			b.WriteString(`<table:table-cell table:number-columns-repeated="1000"/></table:table-row>`)
		}
		b.WriteString(`<table:table-row table:number-rows-repeated="1048000"><table:table-cell table:number-columns-repeated="1024"/></table:table-row></table:table>`)
	}
	b.WriteString(`</office:spreadsheet></office:body></office:document-content>`)
	return zipOf(t, "application/vnd.oasis.opendocument.spreadsheet", map[string][]byte{"content.xml": []byte(b.String())})
}

// zipOf writes a zip: a stored mimetype first when given, then files.
func zipOf(t testing.TB, mimetype string, files map[string][]byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	if mimetype != "" {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: "mimetype", Method: zip.Store})
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(mimetype))
	}
	for name, data := range files {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// makeXLSX writes an XLSX through excelize: cells by address per sheet.
func makeXLSX(t testing.TB, sheets map[string]map[string]any, order []string) []byte {
	t.Helper()
	f := excelize.NewFile()
	defer f.Close()
	for i, name := range order {
		if i == 0 {
			if err := f.SetSheetName("Sheet1", name); err != nil {
				t.Fatal(err)
			}
		} else if _, err := f.NewSheet(name); err != nil {
			t.Fatal(err)
		}
		for ref, v := range sheets[name] {
			if err := f.SetCellValue(name, ref, v); err != nil {
				t.Fatal(err)
			}
		}
	}
	buf, err := f.WriteToBuffer()
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// makePNG writes a w×h PNG of colour c with the first n pixels (in
// reading order) another colour.
func makePNG(t testing.TB, w, h int, c color.NRGBA, n int) []byte {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for i := 0; i < w*h; i++ {
		p := c
		if i < n {
			p = color.NRGBA{255 - c.R, 255 - c.G, 255 - c.B, 255}
		}
		img.SetNRGBA(i%w, i/w, p)
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// write writes files (path → content) below dir.
func write(t testing.TB, dir string, files map[string][]byte) {
	t.Helper()
	for p, data := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		mode := os.FileMode(0o644)
		if strings.HasSuffix(p, ".sh") {
			mode = 0o755
		}
		if err := os.WriteFile(full, data, mode); err != nil {
			t.Fatal(err)
		}
	}
}

// loadSpec writes a grade file into dir and loads it.
func loadSpec(t testing.TB, dir, yaml string) *Spec {
	t.Helper()
	p := filepath.Join(dir, "grade.yaml")
	write(t, dir, map[string][]byte{"grade.yaml": []byte(yaml)})
	s, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// gradeIn grades spec against the files below dir/files.
func gradeIn(spec *Spec, dir string) trace.Grade {
	return spec.Grade(context.Background(), filepath.Join(dir, "files"), dir)
}
