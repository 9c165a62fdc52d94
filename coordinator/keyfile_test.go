package coordinator_test

import (
	"crypto/rand"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/ocap"
)

// TestKeyFileImportedOnFirstStart: a ring from `capgate keys generate`
// signs from the first start; after that the store's ring wins (a changed
// file is not read again), and a world-readable file is refused.
func TestKeyFileImportedOnFirstStart(t *testing.T) {
	e := newEnv(t, map[string]int32{"t": 1})
	ring, err := ocap.NewKeyRing(rand.Reader, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "keys.json")
	if err := ring.SaveFile(file); err != nil {
		t.Fatal(err)
	}
	e.cfg.KeyFile = file
	h := e.start(t)
	if kids := jwksKids(t, h); !kids[ring.Current.ID] || !kids[ring.Next.ID] {
		t.Fatalf("jwks %v lacks the imported keys", kids)
	}
	h.stop(t)

	other, _ := ocap.NewKeyRing(rand.Reader, time.Now())
	if err := other.SaveFile(file); err != nil {
		t.Fatal(err)
	}
	h = e.start(t)
	if kids := jwksKids(t, h); !kids[ring.Current.ID] || kids[other.Current.ID] {
		t.Fatalf("restart read the key file again: %v", kids)
	}
	h.stop(t)

	e2 := newEnv(t, map[string]int32{"t": 1})
	os.Chmod(file, 0o644)
	e2.cfg.KeyFile = file
	if err := newCoordinatorErr(t, e2); err == nil || !strings.Contains(err.Error(), "0600") {
		t.Fatalf("world-readable key file accepted: %v", err)
	}
}

func jwksKids(t *testing.T, h *harness) map[string]bool {
	t.Helper()
	status, body, _ := h.do(t, http.MethodGet, "/.well-known/jwks.json", "", nil)
	if status != http.StatusOK {
		t.Fatalf("jwks: %d %s", status, body)
	}
	var set api.JWKS
	if err := json.Unmarshal(body, &set); err != nil {
		t.Fatal(err)
	}
	kids := map[string]bool{}
	for _, k := range set.Keys {
		kids[k.Kid] = true
	}
	return kids
}

// newCoordinatorErr builds a coordinator from e's config and returns New's
// error (closing the coordinator if it was built).
func newCoordinatorErr(t *testing.T, e *env) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := coordinator.New(e.cfg, e.log, coordinator.WithListener(ln), coordinator.WithBroker(e.broker))
	if err == nil {
		c.Close()
	}
	return err
}
