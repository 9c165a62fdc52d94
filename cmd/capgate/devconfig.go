package main

import (
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/capgate/capgate/gateway"
)

// printDevBanner says where everything is and how to use it. The address
// lines ("coordinator:     http://...", labels padded to one column) are
// stable: tests read them. demo is --demo-duration with --demo, else 0.
func printDevBanner(w io.Writer, s *devStack, demo time.Duration) {
	creds := filepath.Join(s.dataDir, credentialsFile)
	env := filepath.Join(s.dataDir, credentialsEnvFile)
	fmt.Fprintf(w, "capgate dev is ready (data in %s)\n\n", s.dataDir)
	printDevAddresses(w, s, creds, env, demo)
	if demo > 0 {
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

Press Ctrl-C to stop; records, offsets and credentials are kept in %s
(the admin audit view is not: it is memory since the start; the log's
"admin action" lines are the record).
`, env, indent(exportLines(publicEnv(s.env()))), s.Kafka.Addrs()[0], curlNote(s), curlTLS(s), curlCoordinator(s), creds, s.dataDir)
}

// curlCoordinator is the coordinator URL of the banner's curl line:
// $CAPGATE_COORDINATOR_URL with one coordinator. With --replicas that
// variable holds the replicas' list (which the CLI takes, and curl would
// take for one URL with a bad port), so $CAPGATE_LEADER_URL, the replica
// that led at start.
func curlCoordinator(s *devStack) string {
	if len(s.Coordinators()) > 1 {
		return "$" + envLeaderURL
	}
	return "$" + envCoordinatorURL
}

// curlNote says, with replicas, why the curl line names one replica.
func curlNote(s *devStack) string {
	if len(s.Coordinators()) > 1 {
		return " (at $" + envLeaderURL + ", the replica leading now: curl takes one URL, and the others answer 421 not_leader naming the leader)"
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

// bannerLabelWidth is the banner's label column: its longest label,
// "kafka listener:", and two spaces.
const bannerLabelWidth = len("kafka listener:") + 2

// kafkaListenerNote says how a Kafka client connects to the listener:
// with --tls it is TLS (SASL_SSL, trusting the dev CA), else plaintext.
func kafkaListenerNote(tls bool) string {
	if tls {
		return "any Kafka client: security.protocol SASL_SSL with the CA $" + envCACert + "; SASL OAUTHBEARER, or PLAIN with a token as password"
	}
	return "any Kafka client: security.protocol SASL_PLAINTEXT; SASL OAUTHBEARER, or PLAIN with a token as password"
}

// fetchLanes names the listener's fetch lanes beyond lane 0 (bound at
// addr): lane j at the port + j, or free ports when kafka_listen's port
// is 0 ("" with one lane).
func fetchLanes(addr string, cfg gateway.Config) string {
	extra := cfg.KafkaFetchLanes - 1
	if extra < 1 {
		return ""
	}
	host, portText, err := net.SplitHostPort(addr)
	port, perr := strconv.Atoi(portText)
	if _, listen, _ := net.SplitHostPort(cfg.KafkaListen); listen == "0" || err != nil || perr != nil {
		return fmt.Sprintf("%d more free ports, in the log's \"kafka listener started\" line", extra)
	}
	if extra == 1 {
		return net.JoinHostPort(host, strconv.Itoa(port+1))
	}
	return fmt.Sprintf("%s-%d", net.JoinHostPort(host, strconv.Itoa(port+1)), port+extra)
}

// consoleLifetime says, with --demo, that the console goes when the demo
// ends: the demo is a checked run that exits with its verdict (scripts
// and CI read its exit code), so it stops the whole stack after
// --demo-duration, and a console opened from the banner a little later
// refused the connection with nothing to say why (console5 #5).
func consoleLifetime(demo time.Duration) string {
	if demo <= 0 {
		return ""
	}
	return fmt.Sprintf("; up only while the demo runs: it stops everything after %s — to look around, --demo-duration 10m, or capgate dev without --demo, which runs until Ctrl-C", demo)
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

// printDevAddresses is the banner's table of addresses, one column of
// labels.
func printDevAddresses(w io.Writer, s *devStack, creds, env string, demo time.Duration) {
	row := func(label, value, note string) {
		if note != "" {
			value += "   (" + note + ")"
		}
		fmt.Fprintf(w, "  %-*s%s\n", bannerLabelWidth, label+":", value)
	}
	row("kafka", strings.Join(s.Kafka.Addrs(), ","), devTopicsNote(s.topics))
	row("coordinator", s.CoordinatorURL(), "")
	if urls := s.CoordinatorURLs(); len(urls) > 1 {
		row("replicas", strings.Join(urls, ","), "state in Kafka; the coordinator above leads, the others follow and answer 421 not_leader")
	}
	row("gateway", s.GatewayURLs()[0], "")
	if addr := s.kafkaAddr(); addr != "" {
		row("kafka listener", addr, kafkaListenerNote(s.clientTLS.CAFile != ""))
		if lanes := fetchLanes(addr, s.Gateways()[0].Config()); lanes != "" {
			row("fetch lanes", lanes, "the listener's other brokers, for group clients such as kcat -G, kgo, KafkaJS: open them too")
		}
	}
	row("console", s.CoordinatorURL()+"/console", "log in with admin_token from the credentials file"+consoleLifetime(demo))
	row("credentials", creds+" and "+env, "mode 0600: admin_token, client_credential, sync_token; never printed")
	fmt.Fprintln(w)
}
