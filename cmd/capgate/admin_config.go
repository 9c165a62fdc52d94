package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"

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
	var d struct {
		Config json.RawMessage `json:"config"` // GroupDescription's, as the API wrote it
	}
	if err := c.do(cmd.Context(), http.MethodGet, groupPath(group)+"?limit=1", nil, &d); err != nil {
		return err
	}
	return f.print(cmd.OutOrStdout(), d.Config, printGroupConfig)
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
		{"session-timeout", msText(v.SessionTimeoutMs)},
		{"handoff-timeout", msText(v.HandoffTimeoutMs)},
		{"max-moves-per-second", moves},
		{"offset-reset", v.OffsetReset},
	})
}
