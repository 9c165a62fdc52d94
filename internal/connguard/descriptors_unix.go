//go:build unix

package connguard

import "syscall"

// DescriptorLimit is the process's RLIMIT_NOFILE soft limit — on Linux
// Go raises it to the hard limit at start — or false when unknown.
func DescriptorLimit() (uint64, bool) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0, false
	}
	return uint64(r.Cur), true
}
