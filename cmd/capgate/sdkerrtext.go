package main

import "strings"

// withoutOp is err without the SDK's opening "client: OP: ", which the
// CLI's own wrapping says already: a failed produce read "produce demo/0
// after 0 records: client: produce demo/0: ...", a refused join
// "consume: join g2: client: join: ..." (the operation twice;
// newuser11). Errors still unwrap to err's chain.
func withoutOp(err error, op string) error {
	text, found := strings.CutPrefix(err.Error(), "client: "+op+": ")
	if !found {
		return err
	}
	return &trimmedError{text: text, err: err}
}

// trimmedError is an error printed as text, unwrapping to err.
type trimmedError struct {
	text string
	err  error
}

func (e *trimmedError) Error() string { return e.text }
func (e *trimmedError) Unwrap() error { return e.err }
