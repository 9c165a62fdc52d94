package timeline

import "time"

// Kind names what happened.
type Kind string

// The kinds of events, in the order a handoff produces them.
const (
	// Join: a member joined (or rejoined) a group.
	Join Kind = "join"
	// Leave: a member left, was declared dead, or was revoked.
	Leave Kind = "leave"
	// Fence: a partition is being revoked under a new epoch, From → To.
	Fence Kind = "fence"
	// Ack: a gateway acknowledged the sync sequence carrying fences.
	Ack Kind = "ack"
	// Commit: the holder of a revoking partition committed its offset.
	Commit Kind = "commit"
	// Release: the holder released a revoking partition.
	Release Kind = "release"
	// Grant: a holder got the partition at Epoch; Moved is set when it
	// ends a move, with PauseMs the time since the fence.
	Grant Kind = "grant"
	// Unowned: nobody holds the partition.
	Unowned Kind = "unowned"
	// Revoked: an admin revoke answered, every gateway safe at Epoch.
	Revoked Kind = "revoked"
	// MemberRevoked: an admin revoked a member's capabilities.
	MemberRevoked Kind = "member_revoked"
	// Lease: an admin lease was set or ended on a partition.
	Lease Kind = "lease"
	// Deny: an admin denied a capability id.
	Deny Kind = "deny"
	// QoS: a QoS override was set or ended; Group, Topic, Partition and
	// Member (the holder) are its selector's, where it names them.
	QoS Kind = "qos"
	// Config: a group's configuration was set (also when a group appears).
	Config Kind = "config"
	// Gateway: a gateway polled for the first time, or got a snapshot.
	Gateway Kind = "gateway"
)

// Event is one line of the timeline. Fields that do not apply are zero;
// Partition is -1 for events about no partition. Text says it all in one
// sentence; the other fields are for filtering and tests.
type Event struct {
	ID        uint64    `json:"id"`
	At        time.Time `json:"at"`
	Kind      Kind      `json:"kind"`
	Group     string    `json:"group,omitempty"`
	Topic     string    `json:"topic,omitempty"`
	Partition int32     `json:"partition"`
	Epoch     uint64    `json:"epoch,omitempty"`
	From      string    `json:"from,omitempty"`
	To        string    `json:"to,omitempty"`
	Member    string    `json:"member,omitempty"`
	Gateway   string    `json:"gateway,omitempty"`
	SyncSeq   uint64    `json:"sync_seq,omitempty"`
	Offset    int64     `json:"offset,omitempty"`
	Moved     bool      `json:"moved,omitempty"`
	PauseMs   int64     `json:"pause_ms,omitempty"`
	Text      string    `json:"text"`
}

// Of reports whether e belongs on group's page: the group's own events,
// and a QoS override that names no group (it applies to the holders of
// every group, as the page's grid shows).
func (e *Event) Of(group string) bool {
	return e.Group == group || (e.Kind == QoS && e.Group == "")
}
