package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/gateway"
)

// devConfigs derives the coordinator's and the gateway's configuration
// from the defaults: loopback addresses, the data directory, the embedded
// broker, the dev tokens, and a gateway that agrees with the coordinator
// on issuer, audience, lease and the sync timing rule.
func devConfigs(f devFlags, brokers []string, creds devCredentials) (coordinator.Config, gateway.Config, error) {
	cc := coordinator.DefaultConfig()
	cc.Listen = f.coordinatorAddr
	cc.DataDir = filepath.Join(f.dataDir, "coordinator")
	cc.AdminTokenHashes = []string{coordinator.HashSecret(creds.AdminToken)}
	cc.SyncTokenHashes = []string{coordinator.HashSecret(creds.SyncToken)}
	cc.Broker.Seeds = brokers

	gc := gateway.DefaultConfig()
	gc.ID = "dev-gateway"
	gc.Listen = f.gatewayAddr
	gc.SyncToken = gateway.Secret(creds.SyncToken)
	gc.Issuer, gc.Audience = cc.ID, cc.Cluster
	gc.Leeway, gc.MaxLease = cc.Leeway, cc.MaxLease
	gc.SyncWait = min(gc.SyncWait, cc.Groups.SyncWaitMax)
	gc.Broker.Seeds = brokers
	if err := checkSyncTimings(cc, gc); err != nil {
		return cc, gc, fmt.Errorf("dev: %w", err)
	}
	return cc, gc, nil
}

// checkSyncTimings is DESIGN §4's rule for a gateway to count as safe once
// silent: it refuses fetches after sync_timeout without a sync, which must
// come before the coordinator gives up on it (gateway_timeout) even with
// the clocks max_clock_skew apart; and a held sync poll must be answered
// before the gateway's sync_timeout.
func checkSyncTimings(cc coordinator.Config, gc gateway.Config) error {
	g := cc.Groups
	switch {
	case gc.SyncTimeout >= g.GatewayTimeout-g.MaxClockSkew:
		return fmt.Errorf("gateway.sync_timeout: must be < coordinator.groups.gateway_timeout - max_clock_skew (%s), got %s", g.GatewayTimeout-g.MaxClockSkew, gc.SyncTimeout)
	case gc.SyncWait > g.SyncWaitMax:
		return fmt.Errorf("gateway.sync_wait: must be <= coordinator.groups.sync_wait_max (%s), got %s", g.SyncWaitMax, gc.SyncWait)
	case g.SyncWaitMax >= gc.SyncTimeout:
		return fmt.Errorf("coordinator.groups.sync_wait_max: must be < gateway.sync_timeout (%s), got %s", gc.SyncTimeout, g.SyncWaitMax)
	case gc.Issuer != cc.ID || gc.Audience != cc.Cluster:
		return fmt.Errorf("gateway.issuer/audience: must be the coordinator's id/cluster (%s/%s), got %s/%s", cc.ID, cc.Cluster, gc.Issuer, gc.Audience)
	case gc.MaxLease < cc.MaxLease:
		return fmt.Errorf("gateway.max_lease: must be >= coordinator.max_lease (%s), got %s", cc.MaxLease, gc.MaxLease)
	}
	return nil
}

// printDevBanner says where everything is and how to use it. The address
// lines ("coordinator:  http://...") are stable: tests read them.
func printDevBanner(w io.Writer, s *devStack, demo bool) {
	creds := filepath.Join(s.dataDir, credentialsFile)
	env := filepath.Join(s.dataDir, credentialsEnvFile)
	fmt.Fprintf(w, `capgate dev is ready (data in %s)

  kafka:        %s   (embedded; topic %q, %d partitions)
  coordinator:  %s
  gateway:      %s
  console:      %s/console   (log in with admin_token from the credentials file)
  credentials:  %s   (mode 0600: admin_token, client_credential, sync_token)

`, s.dataDir, strings.Join(s.broker.Addrs(), ","), devTopic, devPartitions, s.coordinatorURL, s.gatewayURL, s.coordinatorURL, creds)
	if demo {
		return
	}
	fmt.Fprintf(w, `Point the CLI and curl at it from another shell with . %s
(it also sets the secrets CAPGATE_ADMIN_TOKEN and CAPGATE_CREDENTIAL, never printed here):

%s
Consume and produce:

  capgate consume --group demo --topic demo
  echo hello | capgate produce --topic demo --partition 0
  kcat -b %s -t demo -p 0 -P      # straight into Kafka

Join a group with curl:

  curl -X POST "$CAPGATE_COORDINATOR_URL/v1/groups/g/join" \
    -H "Authorization: Bearer $CAPGATE_CREDENTIAL" -H 'Content-Type: application/json' \
    -d '{"topics":["demo"]}'

Operate it: capgate admin --token-file %s groups

Press Ctrl-C to stop; records, offsets and credentials are kept in %s.
`, env, indent(exportLines(publicEnv(s.env()))), s.broker.Addrs()[0], creds, s.dataDir)
}

// publicEnv is env without the secrets: the banner never prints a token.
func publicEnv(env [][2]string) [][2]string {
	var out [][2]string
	for _, kv := range env {
		if kv[0] != "CAPGATE_ADMIN_TOKEN" && kv[0] != "CAPGATE_CREDENTIAL" {
			out = append(out, kv)
		}
	}
	return out
}

func indent(lines string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(lines, "\n") {
		if l != "" {
			b.WriteString("  " + l)
		}
	}
	return b.String()
}
