package xserver

// ProbeWindow returns the window StartWM probed Openbox's readiness with.
func ProbeWindow(w *WM) uint32 { return uint32(w.probe) }
