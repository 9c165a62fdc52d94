package authz

import (
	"cmp"
	"slices"
	"strings"

	"github.com/capgate/capgate/api"
)

// Snapshot is the whole view as sorted lists, for tests, debugging and
// status pages. Kids are the key ids only.
type Snapshot struct {
	Seq            uint64
	Fences         []api.Fence
	Denied         []api.Denied
	RevokedMembers []api.RevokedMember
	QoS            []api.QoSOverride
	Kids           []string
}

// Snapshot copies the view out, every list sorted.
func (v *View) Snapshot() Snapshot {
	v.mu.RLock()
	defer v.mu.RUnlock()
	s := Snapshot{Seq: v.seq, Fences: v.set.Fences(), Denied: v.set.Denied(), RevokedMembers: v.set.Members()}
	for _, q := range v.qos {
		s.QoS = append(s.QoS, q)
	}
	for kid := range v.keys {
		s.Kids = append(s.Kids, kid)
	}
	s.sort()
	return s
}

func (s *Snapshot) sort() {
	slices.SortFunc(s.Fences, compareFences)
	slices.SortFunc(s.Denied, func(a, b api.Denied) int { return strings.Compare(a.JTI, b.JTI) })
	slices.SortFunc(s.RevokedMembers, func(a, b api.RevokedMember) int {
		return cmp.Or(strings.Compare(a.Group, b.Group), strings.Compare(a.MemberID, b.MemberID))
	})
	slices.SortFunc(s.QoS, func(a, b api.QoSOverride) int { return strings.Compare(a.ID, b.ID) })
	slices.Sort(s.Kids)
}
