package coordinator_test

import (
	"bytes"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/store"
)

// TestOAuthTokenWritesStallNoOtherTenant: the token endpoint held the
// OAuth registry's one lock across the store write recording each
// credential it minted, and every OAuth credential's verification (a
// join, a read: revokedOAuthSubject) takes that lock — so one client
// asking for its oauth.live_tokens_max (1,000) credentials at once, a
// write each of a record growing to 1,000 entries, held up every other
// OAuth tenant's requests behind each write (badger: 3.5 s of ~50 ms
// waits, 292 ms at worst; the Kafka-log state: a produce round trip each)
// (redteam16). Here A's credential's record write is held in the store:
// B reads its groups and obtains a credential meanwhile, and A's other
// token request waits for A's own. Fails without (B's read waits for A's
// write).
func TestOAuthTokenWritesStallNoOtherTenant(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	st, err := store.Open(e.cfg.DataDir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	held := &holdOAuthRecord{Backend: st, entered: make(chan struct{}), release: make(chan struct{})}
	h := e.start(t, coordinator.WithBackend(held))
	a := createOAuthClient(t, h, "a", []string{"ga"})
	b := createOAuthClient(t, h, "b", []string{"gb"})
	credB := h.oauthToken(t, b)
	held.arm(a.ClientID)

	aDone := make(chan int, 2)
	for range 2 {
		go func() {
			status, _, _ := tokenRequestNoFatal(h, a.ClientID, a.ClientSecret)
			aDone <- status
		}()
	}
	select {
	case <-held.entered:
	case <-time.After(time.Minute):
		t.Fatal("A's token request never wrote its record")
	}
	bRead := make(chan int, 1)
	go func() {
		status, _, _, _ := h.try("GET", "/v1/groups", credB, nil)
		bRead <- status
	}()
	select {
	case status := <-bRead:
		if status != http.StatusOK {
			t.Fatalf("B's read while A's record write is held: %d", status)
		}
	case <-time.After(20 * time.Second):
		close(held.release)
		t.Fatal("B's read waited for A's credential's record write")
	}
	if status, body, _ := tokenRequest(t, h, clientCredentialsForm(), []string{b.ClientID, b.ClientSecret}); status != http.StatusOK {
		t.Fatalf("B's token request while A's write is held: %d %v", status, body)
	}
	select {
	case status := <-aDone:
		t.Fatalf("A's second token request answered %d while its first's write is held", status)
	default:
	}
	close(held.release)
	for range 2 {
		if status := <-aDone; status != http.StatusOK {
			t.Fatalf("A's token request after the write: %d", status)
		}
	}
}

// holdOAuthRecord holds the first store write after which client id's
// record lists an issued credential (arm sets id) until release.
type holdOAuthRecord struct {
	store.Backend
	entered, release chan struct{}
	mu               sync.Mutex
	id               string
}

func (s *holdOAuthRecord) arm(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.id = id
}

func (s *holdOAuthRecord) Update(fn func(w *store.Writer) error) error {
	err := s.Backend.Update(fn)
	s.mu.Lock()
	id := s.id
	s.mu.Unlock()
	if err != nil || id == "" {
		return err
	}
	if snap, lerr := s.Backend.Load(); lerr == nil && bytes.Contains(snap.Meta["oauth.client/"+id], []byte(`"issued"`)) {
		s.mu.Lock()
		s.id = ""
		s.mu.Unlock()
		close(s.entered)
		<-s.release
	}
	return err
}

// tokenRequestNoFatal is tokenRequest for a goroutine other than the
// test's: a failure is its status (0: no answer).
func tokenRequestNoFatal(h *harness, id, secret string) (int, []byte, error) {
	req, _ := http.NewRequest(http.MethodPost, h.base+"/oauth/token", bytes.NewReader([]byte("grant_type=client_credentials")))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(id, secret)
	resp, err := h.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, err = buf.ReadFrom(resp.Body)
	return resp.StatusCode, buf.Bytes(), err
}
