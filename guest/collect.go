package guest

import (
	"context"
	"fmt"
	"os"

	"github.com/codegirl-games/agentbox/internal/collectfs"
	"github.com/codegirl-games/agentbox/wire"
)

// maxReadChunk bounds one read_file answer.
const maxReadChunk = 4 << 20

// maxListing bounds the paths one collect answer lists (well below
// wire.MaxHeader, with the refusals).
const maxListing = 2 << 20

// collect finds the files below the home the patterns name (collectfs's
// rules: no link followed, devices and FIFOs refused, within the limits).
func (g *Guest) collect(ctx context.Context, req wire.CollectRequest) (wire.CollectResponse, error) {
	var resp wire.CollectResponse
	if g.home == "" {
		return resp, wire.Errorf(wire.CodeInvalid, "collect: the display is not started")
	}
	if req.MaxFiles <= 0 || req.MaxBytes <= 0 {
		return resp, wire.Errorf(wire.CodeInvalid, "collect: limits must be positive")
	}
	root, err := os.OpenRoot(g.home)
	if err != nil {
		return resp, wire.Errorf(wire.CodeInvalid, "collect: %v", err)
	}
	defer root.Close()
	r, err := collectfs.Find(ctx, root, req.Patterns, collectfs.Limits{Files: req.MaxFiles, Bytes: req.MaxBytes})
	if err != nil {
		return resp, wire.Errorf(wire.CodeInvalid, "collect: %v", err)
	}
	resp.Files = make([]wire.CollectFile, 0, len(r.Files))
	listed, cut := 0, 0
	for _, f := range r.Files {
		// The answer is one frame, its header bounded (wire.MaxHeader):
		// paths beyond maxListing are refused, not sent.
		if listed += len(f.Path) + 64; listed > maxListing {
			cut++
			continue
		}
		resp.Files = append(resp.Files, wire.CollectFile{Path: f.Path, Size: f.Size})
	}
	if cut > 0 {
		resp.Refused = append(resp.Refused, wire.CollectRefused{Path: "…", Reason: fmt.Sprintf("%d more: the list of files to collect outgrew %d bytes", cut, maxListing)})
	}
	for _, x := range r.Refused {
		resp.Refused = append(resp.Refused, wire.CollectRefused{Path: x.Path, Reason: x.Reason})
	}
	return resp, nil
}

// readFile answers one chunk of a file below the home.
func (g *Guest) readFile(req wire.ReadFileRequest) (wire.ReadFileResponse, []byte, error) {
	var resp wire.ReadFileResponse
	if g.home == "" {
		return resp, nil, wire.Errorf(wire.CodeInvalid, "read_file: the display is not started")
	}
	if req.Len <= 0 || req.Len > maxReadChunk || req.Offset < 0 {
		return resp, nil, wire.Errorf(wire.CodeInvalid, "read_file: len must be 1..%d and offset not negative", maxReadChunk)
	}
	root, err := os.OpenRoot(g.home)
	if err != nil {
		return resp, nil, wire.Errorf(wire.CodeInvalid, "read_file: %v", err)
	}
	defer root.Close()
	data, eof, err := collectfs.ReadAt(root, req.Path, req.Offset, req.Len)
	if err != nil {
		return resp, nil, wire.Errorf(wire.CodeNotFound, "read_file: %v", err)
	}
	resp.EOF = eof
	return resp, data, nil
}
