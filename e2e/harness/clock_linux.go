//go:build linux

package harness

import (
	"syscall"
	"unsafe"
)

const clockMonotonic = 1 // CLOCK_MONOTONIC

// monotonicNanos reads CLOCK_MONOTONIC, the same clock in every process
// (Go's time.Now carries a monotonic reading too, but relative to the
// process start, so two processes cannot compare theirs).
func monotonicNanos() int64 {
	var ts syscall.Timespec
	if _, _, errno := syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, clockMonotonic, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		panic("harness: clock_gettime(CLOCK_MONOTONIC): " + errno.Error())
	}
	return ts.Nano()
}
