package harness

// Line is one event a consumer reports. The consumer program
// (e2e/harness/cmd/consumer) prints one JSON object per line on stdout, so
// it can be killed or stopped at any moment and every line it printed
// still counts; an in-process Member hands the same lines straight to the
// Log. T is when the event happened on the harness timeline; a request's
// line also carries Sent.
type Line struct {
	T    Time   `json:"t"`
	Kind string `json:"kind"` // see the Line* constants
	// Member is the coordinator's member id (empty until the first join
	// is answered).
	Member    string `json:"member,omitempty"`
	Group     string `json:"group,omitempty"`
	Topic     string `json:"topic,omitempty"`
	Partition int32  `json:"partition"`
	Epoch     uint64 `json:"epoch,omitempty"`
	Offset    int64  `json:"offset"`
	// Op names the coordinator call (join, heartbeat, commit, leave) of
	// a LineCall, or the hook (grant, revoke, lost) of a LineHook.
	Op      string `json:"op,omitempty"`
	Sent    Time   `json:"sent,omitempty"`
	Status  int    `json:"status,omitempty"`
	Code    string `json:"code,omitempty"`
	Release bool   `json:"release,omitempty"`
	// Pending marks a commit line printed when the request left; the
	// line with its answer follows (unless the consumer died first).
	Pending bool   `json:"pending,omitempty"`
	Expires Time   `json:"expires,omitempty"`
	Value   string `json:"value,omitempty"`
	Gateway string `json:"gateway,omitempty"`
	Error   string `json:"error,omitempty"`
	// Capability and Token are printed only by a consumer started with
	// PrintSecrets (a test replaying a zombie's requests): the grant's
	// capability, and the member token of a LineJoined.
	Capability string `json:"capability,omitempty"`
	Token      string `json:"token,omitempty"`
}

// The kinds of Line.
const (
	LineJoined  = "joined"  // a join was answered: Member, Token (secrets)
	LineGrant   = "grant"   // a new capability (join or heartbeat grants)
	LineRenew   = "renew"   // a renewed capability (heartbeat renew)
	LineRevoke  = "revoke"  // a heartbeat's revoke
	LineCall    = "call"    // a coordinator call answered (or failed)
	LineCommit  = "commit"  // one partition's offset of a commit, pending or answered
	LineFetch   = "fetch"   // a fetch answered (or failed), client side
	LineRecord  = "record"  // Poll delivered a record
	LineHook    = "hook"    // OnGrant, OnRevoke or OnLost ran
	LineError   = "error"   // the poll loop ended with an error
	LineExit    = "exit"    // the consumer closed (gracefully)
	LineStarted = "started" // the program runs (first line)
)

// AddConsumerLine records a consumer's line under the consumer's name.
func (l *Log) AddConsumerLine(consumer string, ln Line) {
	key := PartitionKey{Group: ln.Group, Topic: ln.Topic, Partition: ln.Partition}
	l.add(func(s *Snapshot) {
		switch ln.Kind {
		case LineGrant, LineRenew:
			s.Grants = append(s.Grants, Grant{Consumer: consumer, Member: ln.Member, Key: key, Epoch: ln.Epoch,
				Offset: ln.Offset, Expires: ln.Expires, Renewal: ln.Kind == LineRenew, At: ln.T})
		case LineRevoke:
			s.Revokes = append(s.Revokes, Revoke{Consumer: consumer, Member: ln.Member, Key: key, Epoch: ln.Epoch, At: ln.T})
		case LineCall:
			s.Calls = append(s.Calls, Call{Consumer: consumer, Member: ln.Member, Op: ln.Op, Status: ln.Status,
				Code: ln.Code, Sent: ln.Sent, Done: ln.T})
		case LineCommit:
			l.addCommit(Commit{Consumer: consumer, Member: ln.Member, Key: key, Epoch: ln.Epoch, Offset: ln.Offset,
				Release: ln.Release, Status: ln.Status, Code: ln.Code, Answered: !ln.Pending, Sent: ln.Sent, Done: ln.T})
		case LineFetch:
			s.ClientFetches = append(s.ClientFetches, ClientFetch{Consumer: consumer, Member: ln.Member, Gateway: ln.Gateway,
				Key: key, Epoch: ln.Epoch, Offset: ln.Offset, Status: ln.Status, Code: ln.Code, Sent: ln.Sent, Done: ln.T})
		case LineRecord:
			s.Deliveries = append(s.Deliveries, Delivery{Consumer: consumer, Member: ln.Member, Key: key, Epoch: ln.Epoch,
				Offset: ln.Offset, Value: ln.Value, At: ln.T})
		}
	})
}

// commitID names one offset of one commit request.
type commitID struct {
	consumer string
	key      PartitionKey
	offset   int64
	sent     Time
}

// addCommit records a pending commit, or the answer of one (replacing
// the pending entry). Called with l.mu held.
func (l *Log) addCommit(c Commit) {
	if l.pending == nil {
		l.pending = map[commitID]int{}
	}
	id := commitID{c.Consumer, c.Key, c.Offset, c.Sent}
	if i, ok := l.pending[id]; ok && c.Answered {
		l.s.Commits[i] = c
		delete(l.pending, id)
		return
	}
	if !c.Answered {
		l.pending[id] = len(l.s.Commits)
	}
	l.s.Commits = append(l.s.Commits, c)
}
