//go:build tools

// Package internal pins modules that packages are about to import.
package internal

import (
	_ "github.com/anthropics/anthropic-sdk-go"
	_ "github.com/cespare/xxhash/v2"
	_ "github.com/jezek/xgb"
	_ "github.com/klauspost/compress/s2"
	_ "github.com/moby/moby/client"
	_ "github.com/openai/openai-go/v3"
	_ "github.com/spf13/cobra"
	_ "go.yaml.in/yaml/v3"
	_ "golang.org/x/image/draw"
	_ "golang.org/x/sys/unix"
)
