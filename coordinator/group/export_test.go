package group

import "github.com/capgate/capgate/coordinator/assign"

// SetAssignorLookup replaces how machines created from now on resolve
// assignor names and returns a function restoring the default.
func SetAssignorLookup(f func(string) (assign.Func, bool)) (restore func()) {
	old := assignorLookup
	assignorLookup = f
	return func() { assignorLookup = old }
}
