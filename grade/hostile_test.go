package grade

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/codegirl-games/agentbox/trace"
)

// bomb is a zip entry that expands to n zero bytes (deflate makes it
// about a thousandth of that).
func bomb(n int) []byte { return make([]byte, n) }

// pngHeader is a PNG whose header claims w×h pixels: a valid signature,
// IHDR and an empty IDAT, no pixel data.
func pngHeader(w, h uint32) []byte {
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	chunk := func(typ string, data []byte) {
		binary.Write(&b, binary.BigEndian, uint32(len(data)))
		b.WriteString(typ)
		b.Write(data)
		crc := crc32.NewIEEE()
		crc.Write([]byte(typ))
		crc.Write(data)
		binary.Write(&b, binary.BigEndian, crc.Sum32())
	}
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr[0:], w)
	binary.BigEndian.PutUint32(ihdr[4:], h)
	ihdr[8], ihdr[9] = 8, 6 // 8-bit RGBA
	chunk("IHDR", ihdr)
	chunk("IDAT", nil)
	chunk("IEND", nil)
	return b.Bytes()
}

// TestHostile: files made to hurt the grader are refused by their bounds
// (malformed), quickly and without the memory they ask for.
func TestHostile(t *testing.T) {
	const big = MaxUnzipBytes + 16<<20
	manyRows := strings.Repeat("a\n", MaxRows+1)
	manyCells := strings.Repeat(strings.Repeat("1,", 4000)+"1\n", MaxCells/4000+1)
	repeatedRows := `<?xml version="1.0"?><office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"><office:body><office:spreadsheet><table:table table:name="S">` +
		`<table:table-row table:number-rows-repeated="1000000000"><table:table-cell office:value-type="float" office:value="1" table:number-columns-repeated="16384"><text:p>1</text:p></table:table-cell></table:table-row>` +
		`</table:table></office:spreadsheet></office:body></office:document-content>`
	for _, tt := range []struct {
		name, file string
		data       []byte
		spec       string
		detail     string
	}{
		{"ods zip bomb", "b.ods", zipOf(t, odsMime, map[string][]byte{"content.xml": bomb(big)}), "{table: b.ods, cell: A1, equals: 1}", "content.xml expands to"},
		{"xlsx zip bomb", "b.xlsx", zipOf(t, "", map[string][]byte{"xl/workbook.xml": []byte("<workbook/>"), "xl/worksheets/sheet1.xml": bomb(big)}), "{table: b.xlsx, cell: A1, equals: 1}", "unzip size exceeds"},
		{"ods repeated rows and columns", "r.ods", zipOf(t, odsMime, map[string][]byte{"content.xml": []byte(repeatedRows)}), "{table: r.ods, cell: A1, equals: 1}", "more than"},
		{"ods broken xml", "x.ods", zipOf(t, odsMime, map[string][]byte{"content.xml": []byte("<office:document-content><table:table")}), "{table: x.ods, cell: A1, equals: 1}", "not an ODS spreadsheet"},
		{"ods without content", "n.ods", zipOf(t, odsMime, map[string][]byte{"styles.xml": []byte("<x/>")}), "{table: n.ods, cell: A1, equals: 1}", "no content.xml"},
		{"truncated zip", "t.xlsx", makeXLSX(t, map[string]map[string]any{"S": {"A1": 1}}, []string{"S"})[:200], "{table: t.xlsx, cell: A1, equals: 1}", "a broken zip archive"},
		{"csv of too many rows", "rows.csv", []byte(manyRows), "{table: rows.csv, cell: A1, equals: a}", "more than 1048576 rows"},
		{"csv of too many cells", "cells.csv", []byte(manyCells), "{table: cells.csv, cell: A1, equals: 1}", "cells, more than the grader reads"},
		{"png of 30000×30000", "huge.png", pngHeader(30000, 30000), "{image: huge.png, expected: huge.png}", "more pixels than the grader reads"},
		{"file too big to read", "big.txt", bomb(MaxFileBytes + 1), "{text: big.txt, contains: x}", "more than the grader reads"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, dir, map[string][]byte{"files/" + tt.file: tt.data})
			if strings.HasSuffix(tt.file, ".png") {
				write(t, dir, map[string][]byte{tt.file: tt.data})
			}
			var before runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			g := gradeIn(loadSpec(t, dir, "- "+tt.spec+"\n"), dir)
			var after runtime.MemStats
			runtime.ReadMemStats(&after)
			if g.Outcome != trace.GradeMalformed || !strings.Contains(g.Checks[0].Detail, tt.detail) {
				t.Errorf("outcome %s detail %q, want malformed %q", g.Outcome, g.Checks[0].Detail, tt.detail)
			}
			// What grading allocated in all, bounded far below what the
			// file asks for (a bomb's expansion, 30000×30000×4 bytes).
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<30 {
				t.Errorf("grading allocated %d MiB", alloc>>20)
			}
			t.Logf("%s in %.0f ms", g.Checks[0].Detail, g.Checks[0].MS)
		})
	}
}

// TestHostileImageExpected: the expected image is the host's; when it is
// not a PNG the grader could not judge.
func TestHostileImageExpected(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, map[string][]byte{"files/a.png": pngHeader(2, 2), "want.png": []byte("not a png")})
	g := gradeIn(loadSpec(t, dir, "- {image: a.png, expected: want.png}\n"), dir)
	if g.Outcome != trace.GradeInfrastructure {
		t.Errorf("%+v", g)
	}
	if err := os.Remove(dir + "/want.png"); err != nil {
		t.Fatal(err)
	}
	g = gradeIn(&Spec{Checks: []*Check{{Kind: KindImage, File: "a.png", Expected: dir + "/want.png", Weight: 1, Tolerance: 0.01}}}, dir)
	if g.Outcome != trace.GradeInfrastructure {
		t.Errorf("%+v", g)
	}
}
