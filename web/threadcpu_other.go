//go:build !linux

package web

import "time"

// threadCPU cannot be read on this platform: the publisher falls back to
// wall-clock time.
func threadCPU() (time.Duration, bool) { return 0, false }
