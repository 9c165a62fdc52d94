package main

import (
	"runtime"

	"github.com/spf13/cobra"

	"github.com/capgate/capgate/internal/buildinfo"
)

// newVersionCmd is `capgate version`: version, commit and Go version from
// the build (internal/buildinfo; the version from -ldflags -X
// …/internal/buildinfo.version=…, else the module's), and the platform.
// --output json for scripts; JSON when piped, as the admin commands.
func newVersionCmd() *cobra.Command {
	var out outputFlag
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print capgate's version, the commit it was built from and the Go version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info := buildinfo.Read()
			platform := runtime.GOOS + "/" + runtime.GOARCH
			w := cmd.OutOrStdout()
			if out.document(w) {
				return out.print(w, struct {
					buildinfo.Info
					Platform string `json:"platform"`
				}{info, platform})
			}
			return printFields(w, [][2]string{{"version", info.Version}, {"commit", info.Commit}, {"go", info.GoVersion}, {"platform", platform}})
		},
	}
	out.register(cmd.Flags())
	return cmd
}
