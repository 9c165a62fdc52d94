package driver

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/capgate/capgate/coordinator/group"
	"github.com/capgate/capgate/store"
)

// Mapping the machine's records onto the store's layout (store/keys.go).
// Most records have a store counterpart; what the store has no field for
// travels in meta values named below, written in the same transaction:
//
//	meta "coordinator.partition_flags/" + key   partitionFlags JSON (only while any flag is set)
//	meta "coordinator.lease_outside/" + key     "true" while a lease's holder is not a member
//	meta "coordinator.topic/" + topic           partition count, JSON number
//	meta "coordinator.unowned/" + block         partitions a Ready left unowned, in bulk (unowned.go)
//	meta "coordinator.bulk/" + block            partitions' epochs and states, written in bulk (bulk.go)
//
// where key is the JSON array [group, topic, partition], block the JSON
// array [group, topic, partition / 4096].
const (
	metaPartitionFlags = "coordinator.partition_flags/"
	metaLeaseOutside   = "coordinator.lease_outside/"
	metaTopic          = "coordinator.topic/"
)

// partitionFlags are the PartitionRecord fields store.PartitionState lacks.
type partitionFlags struct {
	HolderOutside bool `json:"holder_outside,omitempty"`
	TargetOutside bool `json:"target_outside,omitempty"`
	Released      bool `json:"released,omitempty"`
	Forced        bool `json:"forced,omitempty"`
}

func metaName(prefix string, k partKey) string {
	b, _ := json.Marshal([]any{k.group, k.topic, k.partition})
	return prefix + string(b)
}

func parseMetaName(name, prefix string) (partKey, bool) {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return partKey{}, false
	}
	var parts []json.RawMessage
	var k partKey
	if json.Unmarshal([]byte(rest), &parts) != nil || len(parts) != 3 ||
		json.Unmarshal(parts[0], &k.group) != nil || json.Unmarshal(parts[1], &k.topic) != nil ||
		json.Unmarshal(parts[2], &k.partition) != nil {
		return partKey{}, false
	}
	return k, true
}

// partKey names one partition of one group.
type partKey struct {
	group, topic string
	partition    int32
}

// persist writes one Ready's records in one synchronous transaction.
func (d *Driver) persist(records []group.Record, now time.Time) error {
	s := staging{nowMs: now.UnixMilli(), runs: unownedRuns(records, d.runMin), bulk: bulkRuns(records, d.runMin)}
	err := d.store.Update(func(w *store.Writer) error {
		s.flips, s.edits, s.bulkEdits, s.lastShape = s.flips[:0], blockEdits[uint64]{}, blockEdits[bulkEntry]{}, nil
		for _, r := range records {
			if err := d.write(w, r, &s); err != nil {
				return err
			}
		}
		if err := writeBlocks(w, metaUnowned, d.unowned, s.edits, encodeBlock); err != nil {
			return err
		}
		return d.writeBulkBlocks(w, s.bulkEdits)
	})
	if err != nil {
		return fmt.Errorf("coordinator: persist %d records: %w", len(records), err)
	}
	for _, k := range s.flips {
		d.flagged[k] = !d.flagged[k]
	}
	d.unowned.apply(s.edits)
	d.bulk.apply(s.bulkEdits)
	return nil
}

// staging is what one persist notes while it stages its records, for the
// Driver's own copies once the store committed.
type staging struct {
	nowMs int64
	// flips lists the partitions whose stored flags appear or disappear.
	flips []partKey
	// runs are the topics whose unowned partitions go into blocks
	// (unowned.go); edits what this persist changes in the blocks.
	runs  map[groupTopic]bool
	edits blockEdits[uint64]
	// bulk are the topics whose partitions at a raised epoch go into
	// bulk blocks (bulk.go); bulkEdits what this persist changes in them.
	bulk      map[groupTopic]bool
	bulkEdits blockEdits[bulkEntry]
	lastShape *bulkShape // the shape of the last record put in a bulk block
}

// storedGroup is a group's value in the store (store.GroupConfig.Config,
// JSON): its settings, the credential id that created it and that
// credential's name. A value
// without "creator" (written before creators were kept) reads as a group
// created by nobody.
type storedGroup struct {
	group.GroupConfig
	Creator     string `json:"creator,omitempty"`
	CreatorName string `json:"creator_name,omitempty"` // absent before names were kept
}

// write stages one record, noting in s what the Driver's copies learn
// once the batch committed.
func (d *Driver) write(w *store.Writer, r group.Record, s *staging) error {
	switch r := r.(type) {
	case group.PartitionRecord:
		return d.writePartition(w, r, s)
	case group.OffsetRecord:
		return d.writeOffset(w, r)
	case group.MemberRecord:
		if r.Deleted {
			return w.DeleteMember(r.Group, r.MemberID)
		}
		return w.PutMember(r.Group, store.Member{
			ID: r.MemberID, InstanceID: r.InstanceID, ClientID: r.ClientID,
			Topics: r.Topics, TopicPattern: r.TopicPattern, SessionTimeoutMs: r.SessionTimeout.Milliseconds(),
			Credential: store.Credential(r.Credential),
		})
	case group.GroupRecord:
		if r.Deleted {
			return w.DeleteGroupConfig(r.Group)
		}
		config, err := json.Marshal(storedGroup{GroupConfig: r.Config, Creator: r.Creator, CreatorName: r.CreatorName})
		if err != nil {
			return fmt.Errorf("encode group config: %w", err)
		}
		return w.PutGroupConfig(r.Group, store.GroupConfig{Assignor: r.Config.Assignor, Config: config})
	case group.LeaseRecord:
		return writeLease(w, r)
	case group.DeniedRecord:
		if r.Deleted {
			return w.DeleteDenied(r.Denied.JTI)
		}
		return w.PutDenied(r.Denied.JTI, r.Denied.Exp)
	case group.RevokedMemberRecord:
		if r.Deleted {
			return w.DeleteRevokedMember(r.RevokedMember.Group, r.RevokedMember.MemberID)
		}
		return w.PutRevokedMember(r.RevokedMember.Group, r.RevokedMember.MemberID, r.RevokedMember.Until)
	default:
		return writeGlobal(w, r, s.nowMs)
	}
}

func writeGlobal(w *store.Writer, r group.Record, nowMs int64) error {
	switch r := r.(type) {
	case group.QoSRecord:
		if r.Deleted {
			return w.DeleteQoS(r.Override.ID)
		}
		config, err := json.Marshal(r.Override)
		if err != nil {
			return fmt.Errorf("encode qos override: %w", err)
		}
		return w.PutQoS(r.Override.ID, config, r.Override.Until)
	case group.GatewayRecord:
		if r.Deleted {
			return w.DeleteGateway(r.ID)
		}
		return w.PutGateway(r.ID, nowMs)
	case group.SyncSeqRecord:
		return w.SaveSeq(r.Seq)
	case group.TopicRecord:
		if r.Deleted {
			return w.DeleteMeta(metaTopic + r.Topic)
		}
		return w.PutMeta(metaTopic+r.Topic, []byte(fmt.Sprint(r.Partitions)))
	}
	return fmt.Errorf("unknown record %T", r)
}

// writePartition stages a partition's epoch and state: in a run of one
// topic's partitions, at an epoch above its own key's, as an entry of its
// bulk block (bulk.go); else its epoch on its own key, and its state on
// its own key or, in a run of unowned partitions, as an entry of its
// unowned block (unowned.go).
func (d *Driver) writePartition(w *store.Writer, r group.PartitionRecord, s *staging) error {
	key := partKey{r.Group, r.Topic, r.Partition}
	if r.Forgotten {
		d.noteWritten(s.edits, r)
		return d.forgetPartition(w, r, d.forgetBulk(key, s), &s.flips)
	}
	if s.bulk[groupTopic{r.Group, r.Topic}] {
		if inBlock, err := d.writeBulk(w, r, s); err != nil || inBlock {
			return err
		}
	}
	if err := d.leaveBulk(r, s); err != nil {
		return err
	}
	if err := w.PutEpoch(r.Group, r.Topic, r.Partition, r.Epoch); err != nil {
		return err
	}
	if s.runs[groupTopic{r.Group, r.Topic}] && compactable(r) {
		s.edits.add(key, r.Epoch)
	} else {
		d.noteWritten(s.edits, r)
		state := store.PartitionState{
			State: string(r.State), Owner: r.Holder, Target: r.Target, Epoch: r.HolderEpoch,
			RevokedAtMs: ceilMilli(r.RevokeStarted),
		}
		if err := w.PutPartitionState(r.Group, r.Topic, r.Partition, state); err != nil {
			return err
		}
	}
	flips := &s.flips
	flags := partitionFlags{HolderOutside: r.HolderOutside, TargetOutside: r.TargetOutside, Released: r.Released, Forced: r.Forced}
	switch {
	case flags != partitionFlags{}:
		value, _ := json.Marshal(flags)
		if !d.flagged[key] {
			*flips = append(*flips, key)
		}
		return w.PutMeta(metaName(metaPartitionFlags, key), value)
	case d.flagged[key]:
		*flips = append(*flips, key)
		return w.DeleteMeta(metaName(metaPartitionFlags, key))
	}
	return nil
}

// forgetPartition removes a reaped partition (the store raises its epoch
// floor to the partition's epoch, its own key's or bulk, its live bulk
// entry's) and its stored flags.
func (d *Driver) forgetPartition(w *store.Writer, r group.PartitionRecord, bulk uint64, flips *[]partKey) error {
	if err := w.ForgetPartitionAt(r.Group, r.Topic, r.Partition, bulk); err != nil {
		return err
	}
	if key := (partKey{r.Group, r.Topic, r.Partition}); d.flagged[key] {
		*flips = append(*flips, key)
		return w.DeleteMeta(metaName(metaPartitionFlags, key))
	}
	return nil
}

func (d *Driver) writeOffset(w *store.Writer, r group.OffsetRecord) error {
	key := partKey{r.Group, r.Topic, r.Partition}
	if r.Offset < 0 {
		return w.DeleteOffset(r.Group, r.Topic, r.Partition)
	}
	if d.bugs.DropOddOffsets && r.Offset%2 == 1 {
		return nil // planted bug
	}
	offset := store.CommittedOffset{Offset: r.Offset, Metadata: r.Metadata, Epoch: r.Epoch}
	if d.batch.resets[key] {
		return w.ResetOffset(r.Group, r.Topic, r.Partition, offset)
	}
	return w.PutOffset(r.Group, r.Topic, r.Partition, offset)
}

func writeLease(w *store.Writer, r group.LeaseRecord) error {
	name := metaName(metaLeaseOutside, partKey{r.Group, r.Topic, r.Partition})
	if r.Deleted {
		if err := w.DeleteLease(r.Group, r.Topic, r.Partition); err != nil {
			return err
		}
		return w.DeleteMeta(name)
	}
	if err := w.PutLease(r.Group, r.Topic, r.Partition, store.Lease{Holder: r.Holder, ExpiresAtMs: r.Until.UnixMilli()}); err != nil {
		return err
	}
	if r.Outside {
		return w.PutMeta(name, []byte("true"))
	}
	return w.DeleteMeta(name)
}

func unixMilli(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// ceilMilli is unixMilli rounded up: a handoff's start, stored in ms, is
// never restored earlier than it was, so a restart never ends a handoff
// before its handoff_timeout (found by the simulation, which runs this
// mapping: truncating let the timeout fire up to 1 ms early).
func ceilMilli(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return (t.UnixNano() + int64(time.Millisecond) - 1) / int64(time.Millisecond)
}

func fromMilli(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}
