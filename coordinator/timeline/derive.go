package timeline

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/capgate/capgate/coordinator/group"
)

// Machine is what Observe reads from the state machine (in the loop's
// goroutine, between Ready and Advance): the gateways' acknowledged sync
// sequences, and the sync sequence the Ready's fences went out under.
// *group.Machine implements it.
type Machine interface {
	Gateways() []group.GatewayDescription
	SyncSeq() uint64
}

// Bounds of the derivation state (besides one entry per partition seen,
// which the machine itself bounds).
const (
	maxPendingFences = 1024 // fence sequences waiting for gateway acks
	maxNamed         = 6    // partitions named in one ack line
)

type partKey struct {
	group, topic string
	partition    int32
}

// partState is the last PartitionRecord seen for a partition, and when
// its current move started.
type partState struct {
	epoch    uint64
	state    group.PartitionState
	holder   string
	target   string
	released bool
	fenced   time.Time // while revoking: when the fence was observed
}

// pendingFence is one sync sequence that carried fences, until every live
// gateway acknowledged it.
type pendingFence struct {
	seq   uint64
	at    time.Time
	group string
	parts []string
	count int
}

// deriver turns Readies into events. Only Observe touches it.
type deriver struct {
	parts   map[partKey]*partState
	pending []pendingFence
	acked   map[string]uint64 // per gateway, the highest sequence reported acked
	fresh   pendingFence      // fences of the Ready being observed
	out     []Event
}

func newDeriver() deriver {
	return deriver{parts: make(map[partKey]*partState), acked: make(map[string]uint64)}
}

// Observe derives the events of one Ready, persisted and delivered, and
// publishes them. Call it from the coordinator's loop only, before
// Advance, with the machine that produced rd.
func (f *Feed) Observe(now time.Time, rd group.Ready, m Machine) {
	d := &f.derive
	d.out = d.out[:0]
	if len(d.pending) > 0 {
		d.acks(m.Gateways()) // acks of earlier fences came before this Ready
	}
	d.joins(now, rd.Messages)
	d.commits(now, rd.Persist)
	for _, r := range rd.Persist {
		d.record(now, r)
	}
	d.replies(now, rd.Messages)
	if d.fresh.count > 0 {
		d.fresh.seq, d.fresh.at = m.SyncSeq(), now
		d.pending = append(d.pending, d.fresh)
		if len(d.pending) > maxPendingFences {
			d.pending = d.pending[len(d.pending)-maxPendingFences:]
		}
		d.fresh = pendingFence{}
	}
	f.publish(d.out)
}

func (d *deriver) emit(e Event) {
	if e.Topic == "" {
		e.Partition = -1
	}
	d.out = append(d.out, e)
}

// joins come first: a join's grants are records of the same Ready.
func (d *deriver) joins(now time.Time, msgs []group.Message) {
	for _, msg := range msgs {
		if j, ok := msg.(group.JoinReply); ok {
			d.emit(Event{At: now, Kind: Join, Group: j.Group, Member: j.MemberID,
				Text: fmt.Sprintf("%s joined %s (%d partitions at once)", j.MemberID, j.Group, len(j.Grants))})
		}
	}
}

// commits: an offset committed by the holder of a partition it is giving
// up (plain commits of owned partitions are not timeline news).
func (d *deriver) commits(now time.Time, records []group.Record) {
	for _, r := range records {
		o, ok := r.(group.OffsetRecord)
		if !ok || o.Kept { // a release without an offset: nothing committed
			continue
		}
		p := d.parts[partKey{o.Group, o.Topic, o.Partition}]
		if p == nil || p.state != group.Revoking || p.released {
			continue
		}
		d.emit(Event{At: now, Kind: Commit, Group: o.Group, Topic: o.Topic, Partition: o.Partition, Epoch: p.epoch,
			From: p.holder, Offset: o.Offset,
			Text: fmt.Sprintf("%s committed %s at offset %d", p.holder, partName(o.Topic, o.Partition), o.Offset)})
	}
}

func (d *deriver) record(now time.Time, r group.Record) {
	switch r := r.(type) {
	case group.PartitionRecord:
		d.partition(now, r)
	case group.MemberRecord:
		if r.Deleted {
			d.emit(Event{At: now, Kind: Leave, Group: r.Group, Member: r.MemberID,
				Text: fmt.Sprintf("%s left %s", r.MemberID, r.Group)})
		}
	case group.GroupRecord:
		c := r.Config
		d.emit(Event{At: now, Kind: Config, Group: r.Group,
			Text: fmt.Sprintf("group %s: assignor %s, max moves/s %s, handoff timeout %s, session timeout %s",
				r.Group, c.Assignor, movesText(c.MaxMovesPerSecond), c.HandoffTimeout, c.SessionTimeout)})
	case group.LeaseRecord:
		e := Event{At: now, Kind: Lease, Group: r.Group, Topic: r.Topic, Partition: r.Partition, To: r.Holder}
		e.Text = fmt.Sprintf("%s leased to %s until %s", partName(r.Topic, r.Partition), r.Holder, clock(r.Until))
		if r.Deleted {
			e.Text = fmt.Sprintf("lease of %s to %s ended", partName(r.Topic, r.Partition), r.Holder)
		}
		d.emit(e)
	case group.DeniedRecord:
		if !r.Deleted {
			d.emit(Event{At: now, Kind: Deny, Text: fmt.Sprintf("capability %s denied until %s", r.Denied.JTI, clock(time.Unix(r.Denied.Exp, 0)))})
		}
	case group.RevokedMemberRecord:
		if rm := r.RevokedMember; !r.Deleted {
			d.emit(Event{At: now, Kind: MemberRevoked, Group: rm.Group, Member: rm.MemberID,
				Text: fmt.Sprintf("%s revoked: its capabilities are refused until %s", rm.MemberID, clock(time.Unix(rm.Until, 0)))})
		}
	case group.QoSRecord:
		d.emit(qosEvent(now, r))
	case group.GatewayRecord:
		d.emit(Event{At: now, Kind: Gateway, Gateway: r.ID, Text: fmt.Sprintf("gateway %s polled for the first time", r.ID)})
	}
}

// partition diffs a PartitionRecord against the last one of the same
// partition: a new epoch while revoking is a fence, released flipping is a
// release, a new epoch while owned is a grant.
func (d *deriver) partition(now time.Time, r group.PartitionRecord) {
	key := partKey{r.Group, r.Topic, r.Partition}
	p := d.parts[key]
	if p == nil {
		p = &partState{}
		d.parts[key] = p
	}
	before := *p
	p.epoch, p.state, p.holder, p.target, p.released = r.Epoch, r.State, r.Holder, r.Target, r.Released
	name := partName(r.Topic, r.Partition)
	base := Event{At: now, Group: r.Group, Topic: r.Topic, Partition: r.Partition, Epoch: r.Epoch}
	switch r.State {
	case group.Revoking:
		if before.state != group.Revoking || before.epoch != r.Epoch {
			p.fenced = now
			if before.state == group.Revoking {
				p.fenced = before.fenced // retargeted: the move started earlier
			}
			d.fence(base, r, name)
		} else if before.target != r.Target {
			e := base
			e.Kind, e.From, e.To = Fence, r.Holder, r.Target
			e.Text = fmt.Sprintf("%s retargeted: %s → %s", name, r.Holder, holderText(r.Target))
			d.emit(e)
		}
		if r.Released && !before.released {
			e := base
			e.Kind, e.From = Release, r.Holder
			e.Text = fmt.Sprintf("%s released %s", r.Holder, name)
			d.emit(e)
		}
	case group.Owned:
		if before.state == group.Owned && before.epoch == r.Epoch && before.holder == r.Holder {
			return
		}
		e := base
		e.Kind, e.To = Grant, r.Holder
		e.Text = fmt.Sprintf("%s granted to %s at epoch %d", name, r.Holder, r.Epoch)
		if before.state == group.Revoking {
			e.From, e.Moved, e.PauseMs = before.holder, true, now.Sub(before.fenced).Milliseconds()
			e.Text += fmt.Sprintf(", handed over %d ms after the fence", e.PauseMs)
		}
		d.emit(e)
	case group.Unowned:
		if before.state != group.Unowned || before.epoch != r.Epoch {
			e := base
			e.Kind, e.From = Unowned, before.holder
			e.Text = fmt.Sprintf("%s is unowned", name)
			d.emit(e)
		}
	}
}

func (d *deriver) fence(base Event, r group.PartitionRecord, name string) {
	e := base
	e.Kind, e.From, e.To = Fence, r.Holder, r.Target
	e.Text = fmt.Sprintf("%s fenced at epoch %d: %s → %s", name, r.Epoch, holderText(r.Holder), holderText(r.Target))
	d.emit(e)
	if d.fresh.count == 0 {
		d.fresh.group = r.Group
	}
	if len(d.fresh.parts) < maxNamed {
		d.fresh.parts = append(d.fresh.parts, name)
	}
	d.fresh.count++
}

// replies: admin answers and gateway snapshots.
func (d *deriver) replies(now time.Time, msgs []group.Message) {
	for _, msg := range msgs {
		switch m := msg.(type) {
		case group.RevokeReply:
			d.emit(Event{At: now, Kind: Revoked, Group: m.Group, Topic: m.Topic, Partition: m.Partition, Epoch: m.Epoch,
				Text: fmt.Sprintf("revoke of %s done: every gateway safe at epoch %d", partName(m.Topic, m.Partition), m.Epoch)})
		case group.LeaseReply:
			g := m.Grant
			d.emit(Event{At: now, Kind: Lease, Group: g.Group, Topic: g.Topic, Partition: g.Partition, Epoch: g.Epoch, To: g.Holder,
				Text: fmt.Sprintf("lease of %s done: %s holds it at epoch %d", partName(g.Topic, g.Partition), g.Holder, g.Epoch)})
		case group.SyncReply:
			if m.Reset {
				d.emit(Event{At: now, Kind: Gateway, Gateway: m.Gateway, SyncSeq: m.Seq,
					Text: fmt.Sprintf("gateway %s got a full snapshot at seq %d", m.Gateway, m.Seq)})
			}
		}
	}
}

// acks reports, per gateway, each pending fence sequence it acknowledged
// since the last Ready, stamped with its last poll, and forgets sequences
// every live gateway acknowledged.
func (d *deriver) acks(gateways []group.GatewayDescription) {
	for _, gw := range gateways {
		last := d.acked[gw.ID]
		if gw.Acked <= last {
			continue
		}
		for _, p := range d.pending {
			if p.seq > last && p.seq <= gw.Acked {
				at := gw.LastSeen
				if at.Before(p.at) {
					at = p.at
				}
				d.emit(Event{At: at, Kind: Ack, Group: p.group, Gateway: gw.ID, SyncSeq: p.seq,
					Text: fmt.Sprintf("gateway %s acked seq %d (%s) after %d ms", gw.ID, p.seq, p.names(), at.Sub(p.at).Milliseconds())})
			}
		}
		d.acked[gw.ID] = gw.Acked
	}
	done := 0
	for _, p := range d.pending {
		if !allAcked(gateways, p.seq) {
			break
		}
		done++
	}
	d.pending = d.pending[done:]
}

func allAcked(gateways []group.GatewayDescription, seq uint64) bool {
	for _, gw := range gateways {
		if !gw.Silent && gw.Acked < seq {
			return false
		}
	}
	return true
}

func (p pendingFence) names() string {
	s := strings.Join(p.parts, ", ")
	if more := p.count - len(p.parts); more > 0 {
		s += " and " + strconv.Itoa(more) + " more"
	}
	return s
}

func partName(topic string, partition int32) string {
	return topic + "/" + strconv.Itoa(int(partition))
}

func holderText(h string) string {
	if h == "" {
		return "nobody yet"
	}
	return h
}

func movesText(n int) string {
	if n == 0 {
		return "unlimited"
	}
	return strconv.Itoa(n)
}

func clock(t time.Time) string {
	return t.UTC().Format("15:04:05Z")
}

// qosEvent carries the override's selector in the event's fields
// (group, topic, partition, holder as Member), so a group's page shows
// the override of its group (Event.Of) and its text says what it
// applies to: without them a throttle set on a group reached its page
// only at the next 5 s re-read, and read "QoS override 1f…: 2000 B/s",
// of nothing.
func qosEvent(now time.Time, r group.QoSRecord) Event {
	s := r.Override.Selector
	e := Event{At: now, Kind: QoS, Group: s.Group, Topic: s.Topic, Partition: -1, Member: s.Holder, Text: qosText(r)}
	if s.Partition != nil {
		e.Partition = *s.Partition
	}
	return e
}

func qosText(r group.QoSRecord) string {
	o := r.Override
	of := strings.Join(o.Selector.Parts(), ", ")
	if r.Deleted {
		return fmt.Sprintf("QoS override %s of %s ended", o.ID, of)
	}
	var parts []string
	if o.LogLevel != "" {
		parts = append(parts, "log level "+o.LogLevel)
	}
	if o.Monitor != "" {
		parts = append(parts, "monitor "+o.Monitor)
	}
	if o.MaxBytesPerSec > 0 {
		parts = append(parts, strconv.FormatInt(o.MaxBytesPerSec, 10)+" B/s")
	}
	return fmt.Sprintf("QoS override %s of %s: %s until %s", o.ID, of, strings.Join(parts, ", "), clock(time.Unix(o.Until, 0)))
}
