package gateway

import (
	"io"
	"net/http"
	"testing"
)

// TestPprofNeedsTheSyncToken: the profiles listener answers 401 with a
// JSON body without the sync token (or with another), and serves the
// profiles with it.
func TestPprofNeedsTheSyncToken(t *testing.T) {
	// Port 0, resolved by the gateway: a port picked, closed and handed
	// over was taken by a test running beside it ("address already in
	// use" in CI).
	h := newHarness(t, func(c *Config) { c.PprofListen = "127.0.0.1:0" })
	url := "http://" + h.gw.PprofAddr() + "/debug/pprof/goroutine?debug=1"
	for _, bearer := range []string{"", "wrong", string(h.gw.cfg.SyncToken) + "x"} {
		status, body := pprofGet(t, url, bearer)
		if status != http.StatusUnauthorized {
			t.Fatalf("bearer %q: %d %s", bearer, status, body)
		}
	}
	if status, body := pprofGet(t, url, string(h.gw.cfg.SyncToken)); status != http.StatusOK {
		t.Fatalf("with the sync token: %d %s", status, body)
	}
}

func pprofGet(t *testing.T, url, bearer string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}
