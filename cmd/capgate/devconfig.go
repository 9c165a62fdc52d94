package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
)

// printDevBanner says where everything is and how to use it. The address
// lines ("coordinator:  http://...") are stable: tests read them.
func printDevBanner(w io.Writer, s *devStack, demo bool) {
	creds := filepath.Join(s.dataDir, credentialsFile)
	env := filepath.Join(s.dataDir, credentialsEnvFile)
	fmt.Fprintf(w, `capgate dev is ready (data in %s)

  kafka:        %s   (embedded; topic %q, %d partitions)
  coordinator:  %s
%s  gateway:      %s
%s  console:      %s/console   (log in with admin_token from the credentials file)
  credentials:  %s and %s   (mode 0600: admin_token, client_credential, sync_token; never printed)

`, s.dataDir, strings.Join(s.Kafka.Addrs(), ","), devTopic, devPartitions, s.CoordinatorURL(), replicasBannerLine(s), s.GatewayURLs()[0], kafkaBannerLine(s.kafkaAddr()), s.CoordinatorURL(), creds, env)
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

Join a group with curl%s:

  curl %s-X POST "%s/v1/groups/g/join" \
    -H "Authorization: Bearer $CAPGATE_CREDENTIAL" -H 'Content-Type: application/json' \
    -d '{"topics":["demo"]}'

Operate it: capgate admin --token-file %s groups

Press Ctrl-C to stop; records, offsets and credentials are kept in %s.
`, env, indent(exportLines(publicEnv(s.env()))), s.Kafka.Addrs()[0], curlNote(s), curlTLS(s), curlCoordinator(s), creds, s.dataDir)
}

// curlCoordinator is the coordinator URL of the banner's curl line:
// $CAPGATE_COORDINATOR_URL with one coordinator. With --replicas that
// variable holds the replicas' list (which the CLI takes, and curl would
// take for one URL with a bad port), so the leading replica's URL itself.
func curlCoordinator(s *devStack) string {
	if len(s.Coordinators()) > 1 {
		return s.CoordinatorURL()
	}
	return "$" + envCoordinatorURL
}

// curlNote says, with replicas, why the curl line names one replica.
func curlNote(s *devStack) string {
	if len(s.Coordinators()) > 1 {
		return " (at the leading replica: curl takes one URL, and the others answer 421 not_leader naming the leader)"
	}
	return ""
}

// curlTLS is curl's option for the dev CA with --tls ("" without).
func curlTLS(s *devStack) string {
	if s.clientTLS.CAFile == "" {
		return ""
	}
	return `--cacert "$CAPGATE_CACERT" `
}

// kafkaBannerLine names the gateway's Kafka listener, when it is on.
func kafkaBannerLine(addr string) string {
	if addr == "" {
		return ""
	}
	return "  kafka listener: " + addr + "   (any Kafka client: SASL OAUTHBEARER, or PLAIN with a token as password)\n"
}

// publicEnv is env without the secrets: the banner never prints a token.
func publicEnv(env [][2]string) [][2]string {
	var out [][2]string
	for _, kv := range env {
		if kv[0] != envAdminToken && kv[0] != envCredential {
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

// replicasBannerLine lists the coordinator replicas ("" with one
// coordinator on badger).
func replicasBannerLine(s *devStack) string {
	urls := s.CoordinatorURLs()
	if len(urls) < 2 {
		return ""
	}
	return fmt.Sprintf("  replicas:     %s   (state in Kafka; the coordinator above leads, the others follow and answer 421 not_leader)\n", strings.Join(urls, ","))
}
