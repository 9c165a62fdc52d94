//go:build linux && race

package quietio

import (
	"errors"
	"syscall"
)

// Under the race detector the calls go through syscall.Read and
// syscall.Write: they tell the detector that a socket write happens
// before a later read (syscall's ioSync), which the server's and its
// client's goroutines rely on — with raw calls a test's client read of
// an answer no longer ordered it after the handler that wrote it, and
// the detector reported races that are none. Quiet is not the point of
// a race build; everything else (the poller's waits, errors) is the same.
func sysRead(fd uintptr, p []byte) (int, syscall.Errno) {
	n, err := syscall.Read(int(fd), p)
	return max(n, 0), errnoOf(err)
}

func sysWrite(fd uintptr, p []byte) (int, syscall.Errno) {
	n, err := syscall.Write(int(fd), p)
	return max(n, 0), errnoOf(err)
}

func errnoOf(err error) syscall.Errno {
	var errno syscall.Errno
	if err != nil && !errors.As(err, &errno) {
		return syscall.EIO
	}
	return errno
}
