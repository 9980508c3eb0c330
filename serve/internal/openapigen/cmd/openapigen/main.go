// Command openapigen writes serve/openapi.json: the routes of
// serve/openapi_paths.json with the component schemas made from serve's
// Go types (package openapigen). `go generate ./serve/` runs it in serve's
// directory.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"

	"github.com/codegirl-games/agentbox/serve/internal/openapigen"
)

func main() {
	paths := flag.String("paths", "openapi_paths.json", "the hand-kept document without components.schemas")
	out := flag.String("o", "openapi.json", "the document to write")
	flag.Parse()
	if err := run(*paths, *out); err != nil {
		fmt.Fprintln(os.Stderr, "openapigen:", err)
		os.Exit(1)
	}
}

func run(pathsFile, out string) error {
	paths, err := os.ReadFile(pathsFile)
	if err != nil {
		return err
	}
	root, err := openapigen.ModuleRoot(".")
	if err != nil {
		return err
	}
	g, err := openapigen.New(root, openapigen.API())
	if err != nil {
		return err
	}
	doc, err := g.Document(paths)
	if err != nil {
		return err
	}
	if old, err := os.ReadFile(out); err == nil && bytes.Equal(old, doc) {
		return nil
	}
	tmp := out + ".tmp"
	if err := os.WriteFile(tmp, doc, 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, out); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}
