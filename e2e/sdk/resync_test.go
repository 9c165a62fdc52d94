package sdk_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/client"
	"github.com/capgate/capgate/e2e/sdk"
)

// resyncBound is half of what the fallback takes (a renewal at half the
// 60 s lease): it tells the two apart with room for a loaded machine
// (5 s was the bound, for a resync taking well under a second alone).
const resyncBound = 15 * time.Second

// TestResyncAfterLostHeartbeatAnswer: b joins a group whose two
// partitions a reads; the heartbeat answer carrying b's grant of the
// partition a releases is lost on the wire (a proxy in front of the
// coordinator reads it and cuts b's connection instead of passing it
// on, as a reset after the coordinator decided). The SDK's next
// heartbeat says resync, gets the grant back (same epoch) and b reads
// the moved partition within 15 s of the loss, at a 60 s capability
// lease: before, the grant came back as a renewal once less than half
// the lease was left (29.6 s, hbgrant.md), the partition unread.
func TestResyncAfterLostHeartbeatAnswer(t *testing.T) {
	t.Parallel()
	tm := sdk.DefaultTiming()
	tm.CapabilityLease = 60 * time.Second
	c := sdk.StartCluster(t, sdk.ClusterOptions{Partitions: 2, Timing: tm})
	load := c.StartLoad(t, sdk.LoadOptions{Interval: 10 * time.Millisecond})
	defer load.Stop()
	opts := func(name string) sdk.MemberOptions {
		return sdk.MemberOptions{Name: name, Group: "resync", CommitInterval: 100 * time.Millisecond}
	}
	a := c.NewMember(t, opts("a"))
	sdk.Eventually(t, wait, "a reads both partitions", func() (bool, string) {
		return len(a.Assigned()) == 2, "not yet"
	})

	proxy := startLosingProxy(t, c.CoordinatorURL)
	bOpts := opts("b")
	bOpts.Configure = func(cfg *client.Config) { cfg.CoordinatorURL = proxy.srv.URL }
	b := c.NewMember(t, bOpts)
	sdk.Eventually(t, wait, "b's heartbeat answer carrying its grant was lost", func() (bool, string) {
		_, at := proxy.lost()
		return !at.IsZero(), "no grant in b's heartbeat answers yet"
	})
	moved, lostAt := proxy.lost()
	sdk.Eventually(t, resyncBound, "b reads the partition whose grant was lost", func() (bool, string) {
		for _, d := range b.Deliveries() {
			if d.Partition == moved.Partition {
				return true, ""
			}
		}
		return false, "b delivered nothing of it"
	})
	var first time.Time
	for _, d := range b.Deliveries() {
		if d.Partition == moved.Partition {
			first = d.At
			break
		}
	}
	took := first.Sub(lostAt)
	if took > resyncBound {
		t.Fatalf("b read %v %s after its grant was lost, want < %s (half the lease is 30 s)", moved, took, resyncBound)
	}
	if proxy.resyncs() == 0 {
		t.Fatalf("b sent no heartbeat saying resync after the lost answer")
	}
	t.Logf("b read partition %d %s after the answer with its grant (epoch %d) was lost", moved.Partition, took, moved.Epoch)
}

// losingProxy passes a member's coordinator calls on, except the first
// heartbeat answer that carries a grant: it reads that one and cuts the
// member's connection instead (the coordinator answered; the member
// never learns what). It counts heartbeats saying resync.
type losingProxy struct {
	srv  *httptest.Server
	to   string
	http *http.Client

	mu       sync.Mutex
	grant    api.Grant
	lostAt   time.Time
	resynced int
}

func startLosingProxy(t *testing.T, coordinatorURL string) *losingProxy {
	t.Helper()
	p := &losingProxy{to: strings.TrimRight(coordinatorURL, "/"), http: &http.Client{Timeout: 30 * time.Second}}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *losingProxy) lost() (api.Grant, time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.grant, p.lostAt
}

func (p *losingProxy) resyncs() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.resynced
}

func (p *losingProxy) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	heartbeat := strings.HasSuffix(r.URL.Path, "/heartbeat")
	if heartbeat {
		var req api.HeartbeatRequest
		if json.Unmarshal(body, &req) == nil && req.Resync {
			p.mu.Lock()
			p.resynced++
			p.mu.Unlock()
		}
	}
	out, err := http.NewRequestWithContext(r.Context(), r.Method, p.to+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	out.Header = r.Header.Clone()
	resp, err := p.http.Do(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	if heartbeat && resp.StatusCode == http.StatusOK && p.loseFirstGrant(answer) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close() // the answer never reaches the member
			return
		}
	}
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	w.Write(answer)
}

// loseFirstGrant reports whether answer is the first heartbeat answer
// with a grant, and remembers that grant.
func (p *losingProxy) loseFirstGrant(answer []byte) bool {
	var news api.HeartbeatResponse
	if json.Unmarshal(answer, &news) != nil || len(news.Grants) == 0 {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.lostAt.IsZero() {
		return false
	}
	p.grant, p.lostAt = news.Grants[0], time.Now()
	return true
}
