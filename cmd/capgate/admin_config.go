package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/capgate/capgate/coordinator"
)

// showGroupConfig prints a group's settings: `admin config GROUP` with
// no setting to change. They are read from the group's description (GET
// /v1/admin/groups/{g}: its config) and printed as a change prints them.
func showGroupConfig(cmd *cobra.Command, f *adminFlags, group string) error {
	c, err := f.client()
	if err != nil {
		return err
	}
	var d coordinator.GroupDescription
	if err := c.do(cmd.Context(), http.MethodGet, groupPath(group)+"?limit=1", nil, &d); err != nil {
		return err
	}
	raw, err := json.Marshal(d.Config)
	if err != nil {
		return err
	}
	return f.print(cmd.OutOrStdout(), raw, printGroupConfig)
}

// printGroupConfig lays a group's settings (GroupConfigView) out as
// KEY value lines, durations in Go's units.
func printGroupConfig(w io.Writer, raw json.RawMessage) error {
	v, err := decode[coordinator.GroupConfigView](raw)
	if err != nil {
		return err
	}
	moves := strconv.Itoa(v.MaxMovesPerSecond)
	if v.MaxMovesPerSecond == 0 {
		moves = "0 (unlimited)"
	}
	return printFields(w, [][2]string{
		{"assignor", v.Assignor},
		{"session-timeout", (time.Duration(v.SessionTimeoutMs) * time.Millisecond).String()},
		{"handoff-timeout", (time.Duration(v.HandoffTimeoutMs) * time.Millisecond).String()},
		{"max-moves-per-second", moves},
		{"offset-reset", v.OffsetReset},
	})
}
