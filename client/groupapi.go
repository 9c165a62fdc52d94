package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/client/driver"
	"github.com/capgate/capgate/internal/coordinators"
	"github.com/capgate/capgate/ocap"
	"github.com/capgate/capgate/tlsconf"
)

// GroupAPI carries out a driver's member requests (join, heartbeat,
// commit, leave) for a shell whose fetches are not this package's: the
// gateway's Kafka listener runs one driver per Kafka group member, whose
// records the Kafka client fetches itself. One attempt per call; the
// driver decides retries. Safe for concurrent use.
type GroupAPI struct {
	base string
	tr   *transport
}

// NewGroupAPI talks to the coordinator at coordinatorURL, or to its
// replicas listed comma-separated (following not_leader, leader.go); tc
// (nil: defaults) is the TLS of an https:// URL. At most perReplica
// requests are in flight to each replica at once (and as many
// connections open to it); more wait for a slot, each until its
// context ends (boundCoordinators, as Config.CoordinatorConnectionsMax
// bounds a consumer's). The Kafka listener sends every member's calls
// here, a held heartbeat each, from the gateway's one address, which
// its sync polls share: unbounded, a gateway of more members than the
// coordinator's max_connections_per_address (1,000) had its calls past
// that answered 503 overloaded — and its own sync polls with them, so
// every fetch through it 503 out_of_sync. perReplica <= 0: unbounded.
func NewGroupAPI(coordinatorURL string, tc *tlsconf.Client, perReplica int) *GroupAPI {
	urls := coordinators.Split(coordinatorURL)
	hc := newHTTPClient(tc, 0)
	if len(urls) > 0 {
		if perReplica > 0 {
			hc.Transport.(*http.Transport).MaxConnsPerHost = perReplica // it carries coordinator calls only
			hc = boundCoordinators(hc, urls, perReplica)
		}
		if led, err := WithCoordinators(hc, urls); err == nil { // checked by the caller's config
			hc = led
		}
	}
	base := strings.TrimRight(coordinatorURL, "/")
	if len(urls) > 0 {
		base = strings.TrimRight(urls[0], "/")
	}
	return &GroupAPI{base: base, tr: &transport{http: hc}}
}

// GroupNameRule says in words which group names the coordinator and the
// Kafka listener take; ocap.ValidName is the rule itself.
const GroupNameRule = ocap.NameRule

// CheckGroupName refuses, before anything is sent, a group name the
// coordinator would refuse (ocap.ValidName, as its routes check names).
// A name with '/' would otherwise reach the coordinator as another path
// and come back as a 404 for a route that does not exist.
func CheckGroupName(group string) error {
	if ocap.ValidName(group) {
		return nil
	}
	return fmt.Errorf("group name %.80q: a group name is %s", group, GroupNameRule)
}

func (a *GroupAPI) url(group, action string) string {
	return a.base + "/v1/groups/" + url.PathEscape(group) + "/" + action
}

// Attempt carries out one attempt of s (not a fetch) for a member of
// group; credential is the bearer of a join.
func (a *GroupAPI) Attempt(ctx context.Context, group, credential string, s driver.Send) driver.Answered {
	ans := driver.Answered{Call: s.Call}
	if err := CheckGroupName(group); err != nil {
		// The coordinator would answer 400; no retry mends a name.
		ans.Now = time.Now()
		ans.Failure = &driver.Failure{Code: api.CodeBadRequest, Status: http.StatusBadRequest, Final: true, Err: err, Earliest: -1, Latest: -1}
		return ans
	}
	var err error
	switch s.Kind {
	case driver.KindJoin:
		err = a.tr.postKeyed(ctx, "join", a.url(group, "join"), credential, s.JoinKey, s.Join, &ans.Join)
	case driver.KindHeartbeat:
		err = a.tr.postJSON(ctx, "heartbeat", a.url(group, "heartbeat"), s.Token, api.HeartbeatRequest{WaitMs: s.Wait.Milliseconds(), Resync: s.Resync}, &ans.News)
	case driver.KindCommit:
		err = a.tr.postJSON(movingOn(ctx, s), "commit", a.url(group, "commit"), s.Token, s.Commit, nil)
	case driver.KindLeave:
		err = a.tr.postJSON(ctx, "leave", a.url(group, "leave"), s.Token, api.LeaveRequest{}, nil)
	default:
		err = fmt.Errorf("client: group api: request kind %d is not a member request", s.Kind)
	}
	ans.Now = time.Now()
	if err != nil {
		ans.Failure = failureOf(err)
	}
	return ans
}

// Offsets reads the group's committed offsets.
func (a *GroupAPI) Offsets(ctx context.Context, group, memberToken string) (api.OffsetsResponse, error) {
	var resp api.OffsetsResponse
	if err := CheckGroupName(group); err != nil {
		return resp, err
	}
	_, body, err := a.tr.do(ctx, "offsets", request{method: http.MethodGet, url: a.url(group, "offsets"), bearer: memberToken}, maxCoordinatorBody)
	if err != nil {
		return resp, err
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		return resp, fmt.Errorf("client: offsets: decode answer: %w", err)
	}
	return resp, nil
}

// CloseIdleConnections closes the idle keep-alive connections.
func (a *GroupAPI) CloseIdleConnections() { a.tr.http.CloseIdleConnections() }

// CodeOf is the api code of an error from this package: the refusal's
// code, or unavailable for a transport error ("" for nil).
func CodeOf(err error) api.Code { return codeOf(err) }
