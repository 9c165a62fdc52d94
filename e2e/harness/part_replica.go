package harness

import (
	"encoding/json"
	"slices"
	"strings"
)

// RoleChange is a coordinator replica's role change, as its process
// logged it ("replica role": from, to, reason).
type RoleChange struct {
	At       Time
	Part     string // "coordinator", "coordinator-2", …
	From, To string // leader.Role names: follower, candidate, leader, stepping-down
	Reason   string
}

// parseRoleLine reads a coordinator process's JSON log line announcing a
// role change.
func parseRoleLine(part string, line []byte) (RoleChange, bool) {
	if !strings.HasPrefix(part, "coordinator") || !strings.Contains(string(line), `"replica role"`) {
		return RoleChange{}, false
	}
	var l struct {
		Msg    string `json:"msg"`
		From   string `json:"from"`
		To     string `json:"to"`
		Reason string `json:"reason"`
	}
	if json.Unmarshal(line, &l) != nil || l.Msg != "replica role" {
		return RoleChange{}, false
	}
	return RoleChange{At: Now(), Part: part, From: l.From, To: l.To, Reason: l.Reason}, true
}

// RoleChanges lists the role changes the coordinator processes logged so
// far, in order.
func (c *Cluster) RoleChanges() []RoleChange {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.roles)
}
