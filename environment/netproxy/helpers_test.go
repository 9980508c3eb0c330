package netproxy

import "os"

func osMkdirTemp() (string, error) { return os.MkdirTemp("", "abx-np-") }
func osRemoveAll(p string)         { os.RemoveAll(p) }
