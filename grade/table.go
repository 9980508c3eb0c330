package grade

import (
	"archive/zip"
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/xuri/excelize/v2"
)

// cellv is one cell's value: its text as shown (ODS text:p; XLSX and CSV
// the value), its raw value (ODS office:value and the like; else the
// text), and its number when it is one.
type cellv struct {
	text, raw string
	num       float64
	isNum     bool
}

func (c cellv) empty() bool { return c.text == "" && c.raw == "" && !c.isNum }

// number is the cell's number: its numeric value, or its text read as one.
func (c cellv) number() (float64, bool) {
	if c.isNum {
		return c.num, true
	}
	for _, s := range []string{c.raw, c.text} {
		if f, err := strconv.ParseFloat(strings.TrimSpace(s), 64); err == nil && s != "" {
			return f, true
		}
	}
	return 0, false
}

func (c cellv) String() string {
	if c.empty() {
		return "empty"
	}
	if c.text == "" {
		return strconv.Quote(c.raw)
	}
	return quote(c.text)
}

// sheet is a grid of cells, rows of varying length; cells past a row's
// end and rows past the end are empty.
type sheet struct {
	name string
	rows [][]cellv
}

func (s *sheet) at(row, col int) cellv {
	if row < len(s.rows) && col < len(s.rows[row]) {
		return s.rows[row][col]
	}
	return cellv{}
}

// trim drops trailing empty cells and rows.
func (s *sheet) trim() {
	for i, r := range s.rows {
		n := len(r)
		for n > 0 && r[n-1].empty() {
			n--
		}
		s.rows[i] = r[:n]
	}
	n := len(s.rows)
	for n > 0 && len(s.rows[n-1]) == 0 {
		n--
	}
	s.rows = s.rows[:n]
}

// errNotSheet says a file is not what a table check reads.
type errNotSheet struct{ msg string }

func (e *errNotSheet) Error() string { return e.msg }

// errNoSheet says the sheet asked for is not in the file.
type errNoSheet struct {
	want string
	have []string
}

func (e *errNoSheet) Error() string {
	return fmt.Sprintf("has no sheet %q (it has %s)", e.want, strings.Join(quoteAll(e.have), ", "))
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strconv.Quote(s)
	}
	return out
}

// readSheet reads the sheet named want (empty: the first) of a CSV, ODS
// or XLSX file (told by its content; name is its path, for the
// extension and messages).
func readSheet(name string, data []byte, want string) (*sheet, error) {
	ext := strings.ToLower(filepath.Ext(name))
	if bytes.HasPrefix(data, []byte("PK\x03\x04")) {
		zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return nil, &errNotSheet{fmt.Sprintf("not a spreadsheet: a broken zip archive (%v)", err)}
		}
		if isODS(zr) {
			return readODS(zr, want)
		}
		for _, f := range zr.File {
			if f.Name == "xl/workbook.xml" {
				return readXLSX(data, want)
			}
		}
		return nil, &errNotSheet{"not a spreadsheet: a zip archive that is neither ODS nor XLSX"}
	}
	switch ext {
	case ".ods", ".xlsx", ".xlsm", ".xls", ".fods":
		return nil, &errNotSheet{fmt.Sprintf("not a spreadsheet: not the zip archive a %s file is", ext)}
	}
	if want != "" && want != strings.TrimSuffix(filepath.Base(name), filepath.Ext(name)) {
		return nil, &errNoSheet{want, []string{strings.TrimSuffix(filepath.Base(name), filepath.Ext(name))}}
	}
	return readCSV(data)
}

func readCSV(data []byte) (*sheet, error) {
	if !utf8.Valid(data) {
		return nil, &errNotSheet{"not CSV: not UTF-8 text"}
	}
	r := csv.NewReader(bytes.NewReader(bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))))
	r.FieldsPerRecord = -1
	r.ReuseRecord = false
	s := &sheet{}
	cells := 0
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, &errNotSheet{fmt.Sprintf("not CSV: %v", err)}
		}
		if len(s.rows) >= MaxRows {
			return nil, &errNotSheet{fmt.Sprintf("more than %d rows, more than the grader reads", MaxRows)}
		}
		if cells += len(rec); cells > MaxCells {
			return nil, &errNotSheet{fmt.Sprintf("more than %d cells, more than the grader reads", MaxCells)}
		}
		row := make([]cellv, len(rec))
		for i, f := range rec {
			row[i] = cellv{text: f, raw: f}
		}
		s.rows = append(s.rows, row)
	}
	return s, nil
}

// readXLSX reads a sheet through excelize, its archive's expansion
// bounded.
func readXLSX(data []byte, want string) (*sheet, error) {
	f, err := excelize.OpenReader(bytes.NewReader(data), excelize.Options{UnzipSizeLimit: MaxUnzipBytes, UnzipXMLSizeLimit: MaxUnzipBytes})
	if err != nil {
		return nil, &errNotSheet{fmt.Sprintf("not an XLSX spreadsheet: %v", err)}
	}
	defer f.Close()
	names := f.GetSheetList()
	if len(names) == 0 {
		return nil, &errNotSheet{"not an XLSX spreadsheet: no sheet"}
	}
	name := names[0]
	if want != "" {
		name = ""
		for _, n := range names {
			if n == want {
				name = n
			}
		}
		if name == "" {
			return nil, &errNoSheet{want, names}
		}
	}
	rows, err := f.Rows(name)
	if err != nil {
		return nil, &errNotSheet{fmt.Sprintf("not an XLSX spreadsheet: sheet %q: %v", name, err)}
	}
	defer rows.Close()
	s := &sheet{name: name}
	cells := 0
	for rows.Next() {
		if len(s.rows) >= MaxRows {
			return nil, &errNotSheet{fmt.Sprintf("more than %d rows, more than the grader reads", MaxRows)}
		}
		cols, err := rows.Columns(excelize.Options{RawCellValue: true})
		if err != nil {
			return nil, &errNotSheet{fmt.Sprintf("not an XLSX spreadsheet: sheet %q: %v", name, err)}
		}
		if cells += len(cols); cells > MaxCells {
			return nil, &errNotSheet{fmt.Sprintf("more than %d cells, more than the grader reads", MaxCells)}
		}
		row := make([]cellv, len(cols))
		for i, v := range cols {
			row[i] = cellv{text: v, raw: v}
		}
		s.rows = append(s.rows, row)
	}
	if err := rows.Error(); err != nil {
		return nil, &errNotSheet{fmt.Sprintf("not an XLSX spreadsheet: sheet %q: %v", name, err)}
	}
	return s, nil
}

// cellRef is a zero-based cell address.
type cellRef struct{ row, col int }

func (r cellRef) String() string { return colName(r.col) + strconv.Itoa(r.row+1) }

func colName(col int) string {
	s := ""
	for col++; col > 0; col = (col - 1) / 26 {
		s = string(rune('A'+(col-1)%26)) + s
	}
	return s
}

// parseRef reads B10 or $B$10 (columns up to XFD, rows up to 1048576).
func parseRef(s string) (cellRef, error) {
	t := strings.ReplaceAll(strings.ToUpper(s), "$", "")
	i := 0
	col := 0
	for i < len(t) && t[i] >= 'A' && t[i] <= 'Z' {
		col = col*26 + int(t[i]-'A') + 1
		i++
		if i > 3 {
			return cellRef{}, fmt.Errorf("%q is not a cell such as B10", s)
		}
	}
	row, err := strconv.Atoi(t[i:])
	if i == 0 || err != nil || row < 1 || row > MaxRows || col > 16384 || strings.ContainsAny(t[i:], "+-") {
		return cellRef{}, fmt.Errorf("%q is not a cell such as B10", s)
	}
	return cellRef{row - 1, col - 1}, nil
}

// splitSheet splits "Sheet1.B10", "Sheet1!B10" or "'My sheet'.B10" into
// the sheet and the rest.
func splitSheet(s string) (sheetName, rest string) {
	i := strings.LastIndexAny(s, ".!")
	if i < 0 {
		return "", s
	}
	name := s[:i]
	if len(name) >= 2 && name[0] == '\'' && name[len(name)-1] == '\'' {
		name = strings.ReplaceAll(name[1:len(name)-1], "''", "'")
	}
	return name, s[i+1:]
}

// setCell reads a table check's cell or range.
func (c *Check) setCell(s string, isRange bool, errf func(string, ...any) error) error {
	sh, rest := splitSheet(s)
	if sh != "" {
		if c.Sheet != "" && c.Sheet != sh {
			return errf("names sheet %q, and sheet names %q", sh, c.Sheet)
		}
		c.Sheet = sh
	}
	if !isRange {
		if _, err := parseRef(rest); err != nil {
			return errf("%v", err)
		}
		c.Cell = rest
		return nil
	}
	a, b, ok := strings.Cut(rest, ":")
	if !ok {
		return errf("%q is not a range such as A1:C3", s)
	}
	ra, err := parseRef(a)
	if err == nil {
		var rb cellRef
		if rb, err = parseRef(b); err == nil && (rb.row < ra.row || rb.col < ra.col) {
			err = fmt.Errorf("%q: the first cell is the top left one", s)
		} else if err == nil && (rb.row-ra.row+1)*(rb.col-ra.col+1) > 100_000 {
			err = fmt.Errorf("%q: more than 100000 cells", s)
		}
	}
	if err != nil {
		return errf("%v", err)
	}
	c.Range = rest
	return nil
}

func rangeRefs(r string) (cellRef, cellRef) {
	a, b, _ := strings.Cut(r, ":")
	ra, _ := parseRef(a)
	rb, _ := parseRef(b)
	return ra, rb
}

func checkRangeEquals(c *Check) error {
	ra, rb := rangeRefs(c.Range)
	rows, ok := c.Equals.([]any)
	if !ok || len(rows) != rb.row-ra.row+1 {
		return fmt.Errorf("range %s: equals must be a list of %d rows, each a list of %d values", c.Range, rb.row-ra.row+1, rb.col-ra.col+1)
	}
	for i, r := range rows {
		cols, ok := r.([]any)
		if !ok || len(cols) != rb.col-ra.col+1 {
			return fmt.Errorf("range %s: equals row %d must be a list of %d values", c.Range, i+1, rb.col-ra.col+1)
		}
		for _, v := range cols {
			switch v.(type) {
			case []any, map[string]any:
				return fmt.Errorf("range %s: equals row %d: a cell is a number, text, true, false or null", c.Range, i+1)
			}
		}
	}
	return nil
}

// cellEquals compares a cell with a wanted JSON value.
func cellEquals(got cellv, want any, tol float64) bool {
	switch w := want.(type) {
	case nil:
		return got.empty()
	case float64:
		n, ok := got.number()
		return ok && math.Abs(n-w) <= tol
	case bool:
		s := strings.ToLower(strings.TrimSpace(got.raw))
		if w {
			return s == "true" || s == "1"
		}
		return s == "false" || s == "0"
	case string:
		return got.text == w || got.raw == w
	}
	return false
}

// cellsEqual compares two cells of two sheets.
func cellsEqual(a, b cellv, tol float64) bool {
	if a.empty() || b.empty() {
		return a.empty() == b.empty()
	}
	na, oka := a.number()
	nb, okb := b.number()
	if oka && okb {
		return math.Abs(na-nb) <= tol
	}
	return a.text == b.text || a.raw == b.raw || a.text == b.raw || a.raw == b.text
}

func checkTable(c *Check, data []byte) result {
	s, err := readSheet(c.File, data, c.Sheet)
	var noSheet *errNoSheet
	switch {
	case errors.As(err, &noSheet):
		return incorrect("%s %v", c.File, err)
	case err != nil:
		return malformed("%s: %v", c.File, err)
	}
	in := ""
	if c.Sheet != "" {
		in = " of " + c.Sheet
	}
	switch {
	case c.Cell != "":
		ref, _ := parseRef(c.Cell)
		got := s.at(ref.row, ref.col)
		if cellEquals(got, c.Equals, c.Tolerance) {
			return held("%s%s is %s", ref, in, got)
		}
		return incorrect("%s: %s%s is %s, want %s", c.File, ref, in, got, show(c.Equals))
	case c.Range != "":
		ra, rb := rangeRefs(c.Range)
		rows := c.Equals.([]any)
		bad, first := 0, ""
		for i := ra.row; i <= rb.row; i++ {
			cols := rows[i-ra.row].([]any)
			for j := ra.col; j <= rb.col; j++ {
				got := s.at(i, j)
				if !cellEquals(got, cols[j-ra.col], c.Tolerance) {
					if bad == 0 {
						first = fmt.Sprintf("%s is %s, want %s", cellRef{i, j}, got, show(cols[j-ra.col]))
					}
					bad++
				}
			}
		}
		if bad == 0 {
			return held("%s%s as expected", c.Range, in)
		}
		return incorrect("%s: %s%s: %d cells differ; %s", c.File, c.Range, in, bad, first)
	}
	data, err = readHost(c.Expected)
	if err != nil {
		return infrastructure("the expected file: %v", err)
	}
	want, err := readSheet(c.Expected, data, c.Sheet)
	if errors.As(err, &noSheet) { // the expected file's first sheet then
		want, err = readSheet(c.Expected, data, "")
	}
	if err != nil {
		return infrastructure("the expected file %s: %v", c.Expected, err)
	}
	s.trim()
	want.trim()
	bad, first := 0, ""
	rows := max(len(s.rows), len(want.rows))
	for i := range rows {
		cols := 0
		if i < len(s.rows) {
			cols = len(s.rows[i])
		}
		if i < len(want.rows) {
			cols = max(cols, len(want.rows[i]))
		}
		for j := range cols {
			g, w := s.at(i, j), want.at(i, j)
			if !cellsEqual(g, w, c.Tolerance) {
				if bad == 0 {
					first = fmt.Sprintf("%s is %s, want %s", cellRef{i, j}, g, w)
				}
				bad++
			}
		}
	}
	if bad == 0 {
		return held("the sheet%s equals %s (%d rows)", in, filepath.Base(c.Expected), len(want.rows))
	}
	return incorrect("%s: the sheet%s differs from %s in %d cells; %s", c.File, in, filepath.Base(c.Expected), bad, first)
}
