package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
)

// Exit statuses: a usage error (the command line itself is wrong) is 2,
// as Go's flag package, rpk's flag parsing and POSIX utilities have it;
// any other failure is 1.
const (
	exitFailure = 1
	exitUsage   = 2
)

// usageError is a mistake in the command line: an unknown or malformed
// flag, a flag value out of its set (consume --offset), a stray argument,
// an unknown subcommand. Scripts can tell it from a failure of the work.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// usageErrorf is fmt.Errorf as a usageError.
func usageErrorf(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// exitCode is the status the command exits with after err.
func exitCode(err error) int {
	if errors.As(err, new(usageError)) {
		return exitUsage
	}
	return exitFailure
}

// flagUsageError makes cobra's flag parsing errors (unknown flag, a value
// that does not parse) usage errors; set on the root, every command
// inherits it.
func flagUsageError(_ *cobra.Command, err error) error { return usageError{err} }
