package coordinator_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/capgate/capgate/api"
)

// TestTooLargeIsAnsweredNotReset: a body over max_body_bytes, or headers
// over max_header_bytes, is answered 413 / 431 with its JSON body — read
// by Go's own HTTP client, which sends the whole body while the answer
// comes. Before, the coordinator wrote the answer and closed the
// connection with the rest of the request unread: the kernel reset it,
// and the client usually got "connection reset by peer" instead of the
// documented answer.
func TestTooLargeIsAnsweredNotReset(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	e.cfg.MaxBodyBytes = 64 << 10
	h := e.start(t)
	body := []byte(`{"topics":["` + strings.Repeat("a", 4<<20) + `"]}`)
	for i := range 20 {
		req, err := http.NewRequest("POST", h.base+"/v1/groups/g/join", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if i%2 == 1 {
			req.Header.Set("X-Padding", strings.Repeat("p", 64<<10))
		}
		resp, err := h.client.Do(req)
		if err != nil {
			t.Fatalf("request %d: %v, want an answer", i, err)
		}
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		resp.Body.Close()
		want, code := 413, api.CodeBodyTooLarge
		if i%2 == 1 {
			want, code = 431, api.CodeHeadersTooLarge
		}
		if resp.StatusCode != want || errorCode(t, b.Bytes()) != code {
			t.Fatalf("request %d: %d %s, want %d %s", i, resp.StatusCode, b.String(), want, code)
		}
	}
}
