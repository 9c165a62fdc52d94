package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/capgate/capgate/api"
)

// ttlFlag is a duration flag the admin commands send as a *_ms field
// (--ttl as ttl_ms, --token-ttl as token_ttl_ms, --handoff-timeout as
// handoff_timeout_ms). It keeps the text typed, so refusals speak of
// what the user wrote: `admin client-credential --ttl -1s` was answered
// "ttl_ms must be >= 0", and --ttl 100000h "ttl_ms must be within
// [1000, client_credential_ttl_max]" — neither the flag nor the
// maximum's value. The CLI checks the floor itself before anything is
// sent (check, a usage error: exit 2); the ceiling is the coordinator's
// setting, so its 400 — whose details name the field, the limit and its
// value (coordinator ttlBound, msRange) — is worded as the flag (refused,
// a usage error too).
type ttlFlag struct {
	name  string        // the flag, without dashes
	field string        // the request field it is sent as
	d     time.Duration // its value
	typed string        // the text given, "" for the default
	min   time.Duration // the least it may be, but for 0 when zero says what 0 means
	zero  string        // what 0 asks for ("" : 0 is below min)
	lasts string        // what lives at least min, for the refusal
}

// newTTLFlag registers f on fs with def as the default.
func newTTLFlag(fs *pflag.FlagSet, f *ttlFlag, def time.Duration, usage string) *ttlFlag {
	f.d = def
	fs.Var(f, f.name, usage)
	return f
}

func (f *ttlFlag) String() string { return f.d.String() }
func (f *ttlFlag) Type() string   { return "duration" }

// Set parses a duration as pflag's Duration does, and keeps its text.
func (f *ttlFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	f.d, f.typed = d, s
	return nil
}

// ms is the value as the request field carries it.
func (f *ttlFlag) ms() int64 { return f.d.Milliseconds() }

// given is the flag as the user wrote it ("--ttl 100000h"), or its
// default said so.
func (f *ttlFlag) given() string {
	if f.typed == "" {
		return fmt.Sprintf("--%s %s (the default)", f.name, f.d)
	}
	return fmt.Sprintf("--%s %s", f.name, f.typed)
}

// check refuses, before anything is sent, a value below the floor
// every coordinator has (a negative one included), as a usage error.
func (f *ttlFlag) check() error {
	if f.d == 0 && f.zero != "" {
		return nil
	}
	if f.d < f.min {
		also := ""
		if f.zero != "" {
			also = "; 0 asks for " + f.zero
		}
		return usageErrorf("%s is below %s: %s lasts at least %s%s", f.given(), f.min, f.lasts, f.min, also)
	}
	return nil
}

// refused words the coordinator's 400 about f's field (error details
// field) as f, a usage error: above the bound, the flag, its value, the
// setting and the most it may be; otherwise the flag and value before
// the coordinator's message. Any other error is returned as it is.
func (f *ttlFlag) refused(err error) error {
	var e *api.Error
	if !errors.As(err, &e) || e.Code != api.CodeBadRequest || e.Details["field"] != f.field {
		return err
	}
	maxMs, hasMax := e.Details["max"].(float64)
	if limit, ok := e.Details["limit"].(string); ok && hasMax && f.ms() > int64(maxMs) {
		most := time.Duration(maxMs) * time.Millisecond
		return usageErrorf("%s is above %s (%s): ask for at most %s, or raise %s on the coordinator", f.given(), limit, most, most, limit)
	}
	return usageErrorf("%s: %s", f.given(), e.Message)
}
