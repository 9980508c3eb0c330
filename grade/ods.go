package grade

import (
	"archive/zip"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

const (
	odsMime   = "application/vnd.oasis.opendocument.spreadsheet"
	nsTable   = "urn:oasis:names:tc:opendocument:xmlns:table:1.0"
	nsOffice  = "urn:oasis:names:tc:opendocument:xmlns:office:1.0"
	nsText    = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
	maxSpaces = 1000 // text:s c="N" is bounded
)

// isODS reports whether a zip archive says it is an ODS spreadsheet (its
// mimetype entry).
func isODS(zr *zip.Reader) bool {
	for _, f := range zr.File {
		if f.Name != "mimetype" || f.UncompressedSize64 > 256 {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			return false
		}
		b, err := io.ReadAll(io.LimitReader(rc, 256))
		rc.Close()
		return err == nil && strings.TrimSpace(string(b)) == odsMime
	}
	return false
}

// readODS reads the sheet named want (empty: the first) from an ODS
// archive's content.xml: cells with their value type and value, repeated
// rows and columns (a repeat of an empty one costs nothing), covered
// cells (under a merged one) as the empty cells they show. The archive's
// expansion is bounded: content.xml declares its size and is read through
// a limit (archive/zip also refuses more bytes than were declared).
func readODS(zr *zip.Reader, want string) (*sheet, error) {
	var content *zip.File
	for _, f := range zr.File {
		if f.Name == "content.xml" {
			content = f
		}
	}
	if content == nil {
		return nil, &errNotSheet{"not an ODS spreadsheet: no content.xml"}
	}
	if content.UncompressedSize64 > MaxUnzipBytes {
		return nil, &errNotSheet{fmt.Sprintf("content.xml expands to %d bytes, more than the grader reads (%d)", content.UncompressedSize64, MaxUnzipBytes)}
	}
	rc, err := content.Open()
	if err != nil {
		return nil, &errNotSheet{fmt.Sprintf("not an ODS spreadsheet: %v", err)}
	}
	defer rc.Close()
	r := &odsReader{d: xml.NewDecoder(io.LimitReader(rc, MaxUnzipBytes)), want: want}
	s, err := r.read()
	if err != nil {
		return nil, &errNotSheet{fmt.Sprintf("not an ODS spreadsheet: %v", err)}
	}
	if s == nil {
		if want == "" {
			return nil, &errNotSheet{"not an ODS spreadsheet: no sheet"}
		}
		return nil, &errNoSheet{want, r.names}
	}
	return s, nil
}

type odsReader struct {
	d     *xml.Decoder
	want  string
	names []string
	cells int
}

func attr(e xml.StartElement, space, local string) (string, bool) {
	for _, a := range e.Attr {
		if a.Name.Space == space && a.Name.Local == local {
			return a.Value, true
		}
	}
	return "", false
}

// repeat reads a number-…-repeated attribute (default 1), bounded.
func repeat(e xml.StartElement, local string, limit int) (int, error) {
	v, ok := attr(e, nsTable, local)
	if !ok {
		return 1, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("table:%s=%q is not a count", local, v)
	}
	return min(n, limit), nil
}

// read walks the document, keeping the cells of the one sheet wanted.
func (r *odsReader) read() (*sheet, error) {
	for {
		tok, err := r.d.Token()
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		e, ok := tok.(xml.StartElement)
		if !ok || e.Name.Space != nsTable || e.Name.Local != "table" {
			continue
		}
		name, _ := attr(e, nsTable, "name")
		r.names = append(r.names, name)
		keep := r.want == "" || r.want == name
		s, err := r.table(name, keep)
		if err != nil {
			return nil, err
		}
		if keep {
			return s, nil
		}
	}
}

// table reads a table:table's rows until its end; keep says whether its
// cells are kept.
func (r *odsReader) table(name string, keep bool) (*sheet, error) {
	s := &sheet{name: name}
	pendingRows := 0 // empty rows not yet materialised
	depth := 0
	for {
		tok, err := r.d.Token()
		if err != nil {
			return nil, err
		}
		switch e := tok.(type) {
		case xml.StartElement:
			if e.Name.Space == nsTable && e.Name.Local == "table-row" {
				rep, err := repeat(e, "number-rows-repeated", MaxRows+1)
				if err != nil {
					return nil, err
				}
				row, err := r.row(keep)
				if err != nil {
					return nil, err
				}
				if !keep {
					continue
				}
				if len(row) == 0 {
					pendingRows = min(pendingRows+rep, MaxRows+1)
					continue
				}
				if len(s.rows)+pendingRows+rep > MaxRows {
					return nil, fmt.Errorf("more than %d rows, more than the grader reads", MaxRows)
				}
				for range pendingRows {
					s.rows = append(s.rows, nil)
				}
				pendingRows = 0
				for k := range rep {
					if k > 0 {
						if r.cells += len(row); r.cells > MaxCells {
							return nil, fmt.Errorf("more than %d cells, more than the grader reads", MaxCells)
						}
					}
					s.rows = append(s.rows, row)
				}
				continue
			}
			depth++
		case xml.EndElement:
			if depth == 0 {
				return s, nil // </table:table>
			}
			depth--
		}
	}
}

// row reads a table:table-row's cells until its end.
func (r *odsReader) row(keep bool) ([]cellv, error) {
	var row []cellv
	pending := 0 // empty cells not yet materialised
	depth := 0
	for {
		tok, err := r.d.Token()
		if err != nil {
			return nil, err
		}
		switch e := tok.(type) {
		case xml.StartElement:
			if e.Name.Space == nsTable && (e.Name.Local == "table-cell" || e.Name.Local == "covered-table-cell") {
				rep, err := repeat(e, "number-columns-repeated", 16385)
				if err != nil {
					return nil, err
				}
				c, err := r.cell(e)
				if err != nil {
					return nil, err
				}
				if !keep {
					continue
				}
				if c.empty() {
					pending = min(pending+rep, 16385)
					continue
				}
				if len(row)+pending+rep > 16384 {
					return nil, fmt.Errorf("a row of more than 16384 columns")
				}
				if r.cells += pending + rep; r.cells > MaxCells {
					return nil, fmt.Errorf("more than %d cells, more than the grader reads", MaxCells)
				}
				for range pending {
					row = append(row, cellv{})
				}
				pending = 0
				for range rep {
					row = append(row, c)
				}
				continue
			}
			depth++
		case xml.EndElement:
			if depth == 0 {
				return row, nil
			}
			depth--
		}
	}
}

// cell reads one cell: its value by its type, its text from its
// paragraphs (not its annotations).
func (r *odsReader) cell(e xml.StartElement) (cellv, error) {
	var c cellv
	typ, _ := attr(e, nsOffice, "value-type")
	switch typ {
	case "float", "percentage", "currency":
		v, _ := attr(e, nsOffice, "value")
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			c.num, c.isNum, c.raw = f, true, v
		}
	case "boolean":
		c.raw, _ = attr(e, nsOffice, "boolean-value")
	case "date":
		c.raw, _ = attr(e, nsOffice, "date-value")
	case "time":
		c.raw, _ = attr(e, nsOffice, "time-value")
	}
	var text strings.Builder
	paras, inP := 0, 0
	depth, annotation := 0, 0
	for {
		tok, err := r.d.Token()
		if err != nil {
			return c, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			depth++
			switch {
			case annotation > 0 || (t.Name.Space == nsOffice && t.Name.Local == "annotation"):
				annotation++
			case t.Name.Space == nsText && t.Name.Local == "p":
				if paras > 0 {
					text.WriteByte('\n')
				}
				paras++
				inP++
			case t.Name.Space == nsText && t.Name.Local == "s":
				n := 1
				if v, ok := attr(t, nsText, "c"); ok {
					if k, err := strconv.Atoi(v); err == nil && k > 0 {
						n = min(k, maxSpaces)
					}
				}
				text.WriteString(strings.Repeat(" ", n))
			case t.Name.Space == nsText && t.Name.Local == "tab":
				text.WriteByte('\t')
			case t.Name.Space == nsText && t.Name.Local == "line-break":
				text.WriteByte('\n')
			}
		case xml.EndElement:
			if depth == 0 {
				c.text = text.String()
				if c.raw == "" && !c.isNum {
					c.raw = c.text
				}
				return c, nil
			}
			depth--
			switch {
			case annotation > 0:
				annotation--
			case t.Name.Space == nsText && t.Name.Local == "p":
				inP--
			}
		case xml.CharData:
			if annotation == 0 && inP > 0 {
				text.Write(t)
			}
		}
	}
}
