package driver

import (
	"errors"
	"fmt"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/group"
	"github.com/capgate/capgate/ocap"
)

// Verifier verifies the capabilities presented to the coordinator itself
// (commits, releases, leaves). The coordinator's verifies signatures with
// its own keys; the simulation's looks its stand-in tokens up.
type Verifier interface {
	// Capability verifies token as a capability now. denied reports a
	// verified capability that is (or has an ancestor) on the deny-list;
	// err is set, and the claims nil, when it does not verify (an
	// ocap.ErrExpired for an expired one).
	Capability(token string) (claims *ocap.Claims, denied bool, err error)
}

// Refusal is a request refused before the machine sees it: the code of
// the answer and its message.
type Refusal struct {
	Code    api.Code
	Message string
}

// CommitOffsets checks each offset of a commit (release: the
// PartitionCommitted notice, or a leave's final offsets) by member of
// groupName, and returns the machine's offsets with the epochs of their
// capabilities, or why the whole commit is refused (see the Behavior of
// coordinator/commit.go). A capability on the deny-list commits nothing,
// except in a release: its holder stopped on the gateway's 409 and hands
// the partition over with the offset it processed.
func CommitOffsets(v Verifier, groupName, member string, offsets []api.CommitOffset, release bool) ([]group.CommitOffset, *Refusal) {
	out := make([]group.CommitOffset, 0, len(offsets))
	for i, o := range offsets {
		if o.Offset < 0 && !release {
			return nil, &Refusal{api.CodeBadRequest, fmt.Sprintf("offsets[%d]: offset must be >= 0", i)}
		}
		if o.Capability == "" {
			return nil, &Refusal{api.CodeUnauthorized, fmt.Sprintf("offsets[%d]: capability required", i)}
		}
		capability, denied, err := v.Capability(o.Capability)
		switch {
		case err != nil:
			return nil, tokenRefusal(fmt.Sprintf("offsets[%d]: capability", i), err)
		case denied && !release:
			return nil, &Refusal{api.CodeCapabilityRevoked, fmt.Sprintf("offsets[%d]: capability refused: denied by an administrator", i)}
		}
		if reason := commitRefusal(capability, groupName, member, o); reason != "" {
			return nil, &Refusal{api.CodeForbidden, fmt.Sprintf("offsets[%d]: %s", i, reason)}
		}
		out = append(out, group.CommitOffset{
			Topic: o.Topic, Partition: o.Partition, Epoch: capability.Epoch, Offset: o.Offset, Metadata: o.Metadata,
		})
	}
	return out, nil
}

// commitRefusal says why a verified capability may not commit o, or "".
func commitRefusal(capability *ocap.Claims, groupName, member string, o api.CommitOffset) string {
	switch {
	case capability.Group != groupName || capability.Epoch == 0:
		return "capability is not a partition capability of this group"
	case capability.Subject != member:
		return "capability belongs to another holder"
	case capability.Topic != o.Topic || capability.PartitionNumber() != o.Partition:
		return "capability is for another topic or partition"
	case !capability.Ops.Has(ocap.OpCommit):
		return "capability does not allow commit"
	case capability.Offsets != nil && o.Offset >= 0 && !capability.Offsets.Contains(o.Offset) && o.Offset != capability.Offsets.To:
		return "offset outside the capability's offset range"
	}
	return ""
}

// tokenRefusal answers a capability that did not verify.
func tokenRefusal(what string, err error) *Refusal {
	if errors.Is(err, ocap.ErrExpired) {
		return &Refusal{api.CodeTokenExpired, what + " expired"}
	}
	return &Refusal{api.CodeUnauthorized, what + " refused: " + err.Error()}
}
