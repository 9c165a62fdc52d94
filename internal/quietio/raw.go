//go:build linux && !race

package quietio

import (
	"syscall"
	"unsafe"
)

// sysRead is read(2) without entersyscall: the socket is non-blocking.
// len(p) > 0.
func sysRead(fd uintptr, p []byte) (int, syscall.Errno) {
	n, _, errno := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	return int(n), errno
}

// sysWrite is write(2) without entersyscall. len(p) > 0.
func sysWrite(fd uintptr, p []byte) (int, syscall.Errno) {
	n, _, errno := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	return int(n), errno
}
