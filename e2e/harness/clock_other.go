//go:build !linux

package harness

import "time"

// monotonicNanos falls back to the wall clock where CLOCK_MONOTONIC is not
// read (every process uses the same fallback, so events still line up).
func monotonicNanos() int64 { return time.Now().UnixNano() }
