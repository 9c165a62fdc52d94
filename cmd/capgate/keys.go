package main

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/ocap"
)

func newKeysCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "keys", Short: "Make the coordinator's keys and secrets: signing key ring, admin/sync tokens, state KEK"}
	cmd.AddCommand(newKeysGenerate(), newKeysRotate(), newKeysJWKS(), newKeysSecret(), newKeysKEK())
	return cmd
}

func newKeysGenerate() *cobra.Command {
	var out string
	var force bool
	cmd := &cobra.Command{
		Use:   "generate --out keys.json",
		Short: "Write a new key ring (current + next key) with mode 0600, for coordinator.key_file",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := os.Stat(out); err == nil && !force {
				return fmt.Errorf("%s exists; pass --force to replace it (tokens signed by its keys stop verifying)", out)
			}
			ring, err := ocap.NewKeyRing(rand.Reader, time.Now())
			if err != nil {
				return err
			}
			if err := ring.SaveFile(out); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: current kid %s, next kid %s\n", out, ring.Current.ID, ring.Next.ID)
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "keys.json", "key ring file to write")
	cmd.Flags().BoolVar(&force, "force", false, "replace an existing file")
	return cmd
}

func newKeysRotate() *cobra.Command {
	f := &adminFlags{}
	cmd := &cobra.Command{
		Use:   "rotate",
		Short: "Rotate a running coordinator's signing keys (admin API): next becomes current, a new next is made",
		Long: "The same operation as capgate admin rotate-keys (this name beside the other key tools).\n" +
			"The coordinator stores the ring durably, then pushes the new key set to every gateway on\n" +
			"the sync channel. Tokens signed by the old current key keep verifying until the next\n" +
			"rotation retires it; client credentials signed by a retired key must be re-issued.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return call(cmd, f, http.MethodPost, "/v1/admin/keys/rotate", map[string]any{})
		},
	}
	f.register(cmd)
	return cmd
}

func newKeysJWKS() *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "jwks --file keys.json",
		Short: "Print the public keys of a key ring file as a JWK set",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return usageErrorf("--file is required")
			}
			ring, err := ocap.LoadKeyRingFile(file)
			if err != nil {
				return err
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			return enc.Encode(ring.JWKS())
		},
	}
	cmd.Flags().StringVar(&file, "file", "keys.json", "key ring file")
	return cmd
}

func newKeysSecret() *cobra.Command {
	return &cobra.Command{
		Use:   "secret",
		Short: "Make a random bearer token (admin or sync) and the SHA-256 hash to put in the coordinator's config",
		Long: "Prints a new random token and its hex SHA-256 hash. The hash goes in the\n" +
			"coordinator's config, the token to whoever calls it:\n" +
			"  an admin token:  hash in coordinator.admin_token_hashes; the token to\n" +
			"                   capgate admin --token-file / $CAPGATE_ADMIN_TOKEN\n" +
			"  a sync token:    hash in coordinator.sync_token_hashes; the token in\n" +
			"                   gateway.sync_token / $CAPGATE_GATEWAY_SYNC_TOKEN\n" +
			"The coordinator stores only hashes; the token is printed once.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			token, hash, err := coordinator.GenerateSecret()
			if err != nil {
				return err
			}
			// The first two lines as before (scripts read them); then where each goes.
			fmt.Fprintf(cmd.OutOrStdout(), "token: %s\nhash:  %s\n", token, hash)
			fmt.Fprintln(cmd.OutOrStdout(), "(the hash goes in coordinator.admin_token_hashes for an admin token, or in coordinator.sync_token_hashes for a gateway's sync token: gateway.sync_token)")
			return nil
		},
	}
}
