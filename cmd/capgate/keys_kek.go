package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/capgate/capgate/store"
)

// newKeysKEK writes a key-encryption key for coordinator.kafka_state.kek_file.
func newKeysKEK() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "kek --out kek.key",
		Short: "Write a new key-encryption key (mode 0600) for coordinator.kafka_state.kek_file",
		Long: "With state: kafka the signing key ring is sealed with this key (AES-256-GCM) before it\n" +
			"reaches Kafka. Give every coordinator replica of a cluster the same file (or put its\n" +
			"contents in the variable kafka_state.kek_env names). Losing it loses the key ring.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return fmt.Errorf("write %s (an existing file is never replaced): %w", out, err)
			}
			if _, err := fmt.Fprintln(f, store.GenerateKEK()); err != nil {
				f.Close()
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
			kek, err := store.LoadKEKFile(out)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: KEK id %s\n", out, kek.ID())
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "kek.key", "file to write (mode 0600)")
	return cmd
}
