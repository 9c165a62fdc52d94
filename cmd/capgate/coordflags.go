package main

import (
	"net/http"
	"strings"

	"github.com/capgate/capgate/client"
	"github.com/capgate/capgate/internal/coordinators"
)

// coordinatorHelp is the --coordinator flag's help: one URL, or the
// replicas comma-separated (the CLI follows not_leader among them).
const coordinatorHelp = "coordinator base URL, or its replicas' URLs comma-separated (a replica's not_leader is followed to the leader it names) ($CAPGATE_COORDINATOR_URL)"

// coordinatorURLs splits a --coordinator value; an empty one is an error.
func coordinatorURLs(flag string) ([]string, error) {
	urls := coordinators.Split(flag)
	if len(urls) == 0 {
		return nil, usageErrorf("--coordinator: no URL")
	}
	for i, u := range urls {
		urls[i] = strings.TrimRight(u, "/")
	}
	return urls, nil
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
	return &adminClient{base: urls[0], token: token, http: led}, nil
}
