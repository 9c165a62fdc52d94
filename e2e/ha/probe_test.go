package ha

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/client"
	"github.com/capgate/capgate/e2e/harness"
	"github.com/capgate/capgate/internal/stack"
)

// probe is a member of a group of its own that heartbeats (wait_ms 1: an
// answer at once) every 20 ms through every coordinator URL, following
// not_leader as the SDK does: the instant a coordinator answers
// heartbeats again after a kill is when its first 200 came back.
type probe struct {
	hc    *http.Client
	base  string // the first URL (the transport picks the replica)
	group string
	token string

	mu      sync.Mutex
	answers [][2]time.Time // heartbeats answered 200: sent, answered; in order
	stop    chan struct{}
	done    chan struct{}
}

func startProbe(t testing.TB, c *harness.Cluster, group string) *probe {
	t.Helper()
	var urls []string
	for _, co := range c.Replicas {
		urls = append(urls, co.URL)
	}
	hc, err := client.WithCoordinators(&http.Client{Timeout: 2 * time.Second}, urls)
	if err != nil {
		t.Fatal(err)
	}
	p := &probe{hc: hc, base: urls[0], group: group, stop: make(chan struct{}), done: make(chan struct{})}
	cred := c.ClientCredential(t, group)
	var join api.JoinResponse
	req := api.JoinRequest{ClientID: "probe", Topics: []string{c.Topic()}, SessionTimeoutMs: haTiming().SessionTimeout.Milliseconds()}
	if _, err := doJSON(context.Background(), hc, p.base+"/v1/groups/"+url.PathEscape(group)+"/join", cred, req, &join); err != nil {
		t.Fatal(err)
	}
	p.token = join.MemberToken
	go p.run()
	t.Cleanup(p.close)
	return p
}

func (p *probe) run() {
	defer close(p.done)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		sent := time.Now()
		_, err := doJSON(ctx, p.hc, p.base+"/v1/groups/"+url.PathEscape(p.group)+"/heartbeat", p.token, api.HeartbeatRequest{WaitMs: 1}, nil)
		cancel()
		if err == nil {
			p.mu.Lock()
			p.answers = append(p.answers, [2]time.Time{sent, time.Now()})
			p.mu.Unlock()
		}
	}
}

func (p *probe) close() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	<-p.done
}

// firstSentAfter is when the first heartbeat sent after t was answered
// (zero: none yet).
func (p *probe) firstSentAfter(t time.Time) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, a := range p.answers {
		if a[0].After(t) {
			return a[1]
		}
	}
	return time.Time{}
}

// doJSON is stack.DoJSON with a non-2xx answer as an error.
func doJSON(ctx context.Context, hc *http.Client, u, bearer string, in, out any) (int, error) {
	status, raw, err := stack.DoJSON(ctx, hc, http.MethodPost, u, bearer, in, out)
	if err == nil && status/100 != 2 {
		err = fmt.Errorf("%s: %d %s", u, status, raw)
	}
	return status, err
}
