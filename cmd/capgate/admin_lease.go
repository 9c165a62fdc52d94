package main

import (
	"errors"
	"fmt"

	"github.com/capgate/capgate/api"
)

// leaseForceHint adds the CLI's word to a lease refused because another
// holder has the partition (409 conflict with the lease in its details:
// the server says "lease with force"); other errors pass unchanged.
func leaseForceHint(err error, args []string, holder string) error {
	var e *api.Error
	if !errors.As(err, &e) || e.Code != api.CodeConflict || e.Details["lease"] == nil {
		return err
	}
	return fmt.Errorf("%w (pass --force to move it: capgate admin lease %s %s %s --holder %s --force)", err, args[0], args[1], args[2], holder)
}
