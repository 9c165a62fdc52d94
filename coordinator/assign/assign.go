package assign

// Partition identifies one topic partition.
type Partition struct {
	Topic     string
	Partition int32
}

// Less orders partitions by topic, then partition number.
func (p Partition) Less(q Partition) bool {
	if p.Topic != q.Topic {
		return p.Topic < q.Topic
	}
	return p.Partition < q.Partition
}

// Member is one group member as the assignor sees it.
type Member struct {
	ID string
	// Topics the member may be assigned (its subscription, with any pattern
	// already resolved by the caller against known topics).
	Topics map[string]bool
}

// Input is everything an assignor may look at.
type Input struct {
	// Members of the group. Order does not matter; assignors sort.
	Members []Member
	// Partitions to assign: every partition of every topic some member
	// subscribes to, minus partitions leased to an outside holder.
	Partitions []Partition
	// Current owner of each partition (for a partition being revoked, the
	// member it is moving to). Owners that are not in Members are ignored.
	Current map[Partition]string
	// Pins: a partition pinned to a member (an admin lease) must go to that
	// member if it is in Members and subscribes to the topic.
	Pins map[Partition]string
}

// Assignment maps every assignable partition to a member id. A partition
// no member may take is absent.
type Assignment map[Partition]string

// Func is an assignor.
type Func func(Input) Assignment

// Names of the built-in assignors.
const (
	NameSticky = "sticky"
	NameRange  = "range"
)

// Lookup returns the assignor named name ("" means sticky).
func Lookup(name string) (Func, bool) {
	switch name {
	case "", NameSticky:
		return Sticky, true
	case NameRange:
		return Range, true
	}
	return nil, false
}
