//go:build unix

package store

import "syscall"

// privateFiles sets the process umask to 077, so every file badger creates
// while the store runs (memtables, tables, value logs: it has no option
// for their mode and creates them 0666&^umask) is 0600 from its first
// byte, not only after the next Open or Close. The umask is the whole
// process's: the coordinator creates nothing that others should read.
func privateFiles() { syscall.Umask(0o077) }
