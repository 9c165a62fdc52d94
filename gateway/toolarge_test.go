package gateway

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/capgate/capgate/api"
)

// TestTooLargeIsAnsweredNotReset: a produce body over max_body_bytes, or
// headers over max_header_bytes, is answered 413 / 431 with its JSON
// error, read by Go's own HTTP client, which sends the whole body while
// the answer comes.
func TestTooLargeIsAnsweredNotReset(t *testing.T) {
	h := newHarnessWith(t, harnessOptions{edit: func(c *Config) { c.MaxBodyBytes = 64 << 10 }})
	h.waitReady()
	tok, _ := h.mint(withOps(capClaims(0), "produce"))
	body := []byte(`{"records":[{"value":"` + strings.Repeat("A", 4<<20) + `"}]}`)
	for i := range 20 {
		req, err := http.NewRequest("POST", h.base+recordsURL(0), bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+tok)
		if i%2 == 1 {
			req.Header.Set("X-Padding", strings.Repeat("p", 64<<10))
		}
		resp, err := h.client.Do(req)
		if err != nil {
			t.Fatalf("request %d: %v, want an answer", i, err)
		}
		var e api.ErrorBody
		err = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		want, code := 413, api.CodeBodyTooLarge
		if i%2 == 1 {
			want, code = 431, api.CodeHeadersTooLarge
		}
		if resp.StatusCode != want || err != nil || e.Error.Code != code {
			t.Fatalf("request %d: %d %+v %v, want %d %s", i, resp.StatusCode, e, err, want, code)
		}
	}
}
