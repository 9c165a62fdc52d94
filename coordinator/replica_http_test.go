package coordinator

import (
	"testing"

	"github.com/capgate/capgate/coordinator/leader"
)

// Every path the replicas' decision (leader.View.Route) calls public has
// a handler here: a replica that does not lead never panics on one.
func TestReplicaPublicPathsHaveHandlers(t *testing.T) {
	r := &Replica{}
	for _, p := range leader.PublicPaths {
		if r.public(p) == nil {
			t.Errorf("%s: no handler", p)
		}
	}
}
