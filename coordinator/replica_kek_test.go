package coordinator_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
)

// A running replica whose KEK file became readable by others (or was
// replaced so) before it could follow the log: /readyz 503 says why —
// the file, its mode, want 0600, chmod 600 — where it said only "not
// following the state log yet" (newuser2 #4); /healthz stays 200 (the
// process runs). After `chmod 600` it follows the log and leads: the
// KEK is read afresh at each try. (`capgate coordinator` refuses to
// start with such a file: e2e/cli TestCoordinatorRefusesAKEKOthersCanRead.)
func TestReplicaReadyzNamesAKEKOthersCanRead(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	useKafkaState(t, e)
	kek := e.cfg.KafkaState.KEKFile
	if err := os.Chmod(kek, 0o644); err != nil {
		t.Fatal(err)
	}
	s := startReplicas(t, e, 1)
	h := s.harness(0)
	eventually(t, func() string {
		status, body, _ := h.do(t, "GET", "/readyz", "", nil)
		var eb struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		json.Unmarshal(body, &eb)
		if status != http.StatusServiceUnavailable || eb.Error.Code != "unavailable" {
			return fmt.Sprintf("/readyz %d %s", status, body)
		}
		for _, want := range []string{kek, "-rw-r--r--", "want 0600", "chmod 600 " + kek} {
			if !strings.Contains(eb.Error.Message, want) {
				return fmt.Sprintf("/readyz message %q lacks %q", eb.Error.Message, want)
			}
		}
		return ""
	})
	if status, body, _ := h.do(t, "GET", "/healthz", "", nil); status != http.StatusOK {
		t.Fatalf("/healthz %d %s", status, body)
	}
	if err := os.Chmod(kek, 0o600); err != nil {
		t.Fatal(err)
	}
	s.awaitLeader(t)
}
