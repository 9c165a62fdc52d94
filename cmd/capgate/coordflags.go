package main

import (
	"net"
	"net/http"
	"strings"

	"github.com/capgate/capgate/client"
	"github.com/capgate/capgate/internal/coordinators"
)

// coordinatorHelp is the --coordinator flag's help: one URL, or the
// replicas comma-separated (the CLI follows not_leader among them).
const coordinatorHelp = "coordinator base URL, or its replicas' URLs comma-separated (a replica's not_leader is followed to the leader it names) ($CAPGATE_COORDINATOR_URL)"

// coordinatorURLs splits a --coordinator value and checks each URL, as
// usage errors that name the fix; an empty one is an error.
func coordinatorURLs(flag string) ([]string, error) {
	urls := coordinators.Split(flag)
	if len(urls) == 0 {
		return nil, usageErrorf("--coordinator: no URL")
	}
	for i, u := range urls {
		if err := checkCoordinatorURL(u); err != nil {
			return nil, err
		}
		urls[i] = strings.TrimRight(u, "/")
	}
	return urls, nil
}

// checkCoordinatorURL refuses a URL the client package would refuse, in
// the flag's words. A bare HOST:PORT (rpk's habit) is refused, not taken
// as http://: the admin token goes in that request, and guessing
// plaintext for a server that may speak TLS would send it in the clear.
// The message says both spellings; the user picks the scheme.
func checkCoordinatorURL(raw string) error {
	if !strings.Contains(raw, "://") {
		if _, _, err := net.SplitHostPort(raw); err == nil {
			return usageErrorf("--coordinator %q: want a URL: use http://%s (or https://%s for a TLS coordinator)", raw, raw, raw)
		}
		return usageErrorf("--coordinator %q: want a URL such as http://127.0.0.1:7070 (or https://… for a TLS coordinator)", raw)
	}
	if _, err := coordinators.Normalize(raw); err != nil {
		return usageErrorf("--coordinator: %v (e.g. http://127.0.0.1:7070)", err)
	}
	return nil
}

// newAdminClient is the admin API client for the coordinator replicas in
// flag, over hc, following not_leader (client.WithCoordinators).
func newAdminClient(flag, token string, hc *http.Client) (*adminClient, error) {
	urls, err := coordinatorURLs(flag)
	if err != nil {
		return nil, err
	}
	led, err := client.WithCoordinators(hc, urls)
	if err != nil {
		return nil, err
	}
	normalized := make([]string, len(urls))
	for i, u := range urls {
		normalized[i], _ = coordinators.Normalize(u) // checked by coordinatorURLs
	}
	return &adminClient{base: urls[0], urls: normalized, token: token, http: led}, nil
}
