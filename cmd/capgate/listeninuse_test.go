package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestListenInUseSaysWhatToDo: `capgate coordinator` and `capgate
// gateway` whose listen address another process holds (a capgate dev
// still running, most often) fail saying which setting names the address
// and what to do; they said only "bind: address already in use".
func TestListenInUseSaysWhatToDo(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	addr := held.Addr().String()
	dir := t.TempDir()
	for _, c := range []struct{ section, yaml, setting string }{
		{"coordinator", fmt.Sprintf("coordinator:\n  listen: %s\n  data_dir: %s\n", addr, filepath.Join(dir, "data")), "coordinator.listen"},
		{"gateway", fmt.Sprintf("gateway:\n  listen: %s\n  sync_token: x\n", addr), "gateway.listen"},
		{"gateway", fmt.Sprintf("gateway:\n  listen: 127.0.0.1:0\n  kafka_listen: %s\n  kafka_fetch_lanes: 1\n  sync_token: x\n", addr), "gateway.kafka_listen"},
	} {
		path := filepath.Join(dir, c.section+".yaml")
		if err := os.WriteFile(path, []byte(c.yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		err := execute([]string{c.section, "--config", path})
		msg := fmt.Sprint(err)
		for _, want := range []string{"address already in use", "another process already listens at " + addr, "give " + c.setting + " another address in " + path} {
			if !strings.Contains(msg, want) {
				t.Errorf("%s with %s taken: %q, want %q", c.section, c.setting, msg, want)
			}
		}
	}
}
