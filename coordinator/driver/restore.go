package driver

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/group"
	"github.com/capgate/capgate/store"
)

// Restored is what the store held, as the machine's restore snapshot
// (group.Restore), and the partitions whose flags are stored (persist.go),
// which the Driver must know to delete them.
type Restored struct {
	Snapshot group.Snapshot
	flagged  map[partKey]bool
	unowned  unownedBlocks
	bulk     bulkBlocks
}

// Load turns what the store loaded into a Restored: the inverse of
// persist.go.
func Load(s *store.Snapshot) (Restored, error) {
	out := Restored{flagged: make(map[partKey]bool), unowned: unownedBlocks{}, bulk: bulkBlocks{}}
	snap := &out.Snapshot
	m, err := readMeta(s.Meta, snap, out.unowned, out.bulk)
	if err != nil {
		return Restored{}, err
	}
	for _, g := range s.Groups {
		if err := restoreGroup(snap, g, m); err != nil {
			return Restored{}, err
		}
	}
	restoreBulkOnly(snap, m)
	out.unowned.keepLive(m.live)
	out.bulk.keepLive(m.bulkLive)
	for k := range m.flags {
		out.flagged[k] = true
	}
	for _, d := range s.Denied {
		snap.Denied = append(snap.Denied, api.Denied{JTI: d.JTI, Exp: d.Exp})
	}
	for _, r := range s.RevokedMembers {
		snap.RevokedMembers = append(snap.RevokedMembers, api.RevokedMember{Group: r.Group, MemberID: r.MemberID, Until: r.Until})
	}
	for _, q := range s.QoS {
		var o api.QoSOverride
		if err := json.Unmarshal(q.Config, &o); err != nil {
			return Restored{}, fmt.Errorf("qos override %q: %w", q.ID, err)
		}
		snap.QoS = append(snap.QoS, o)
	}
	for _, gw := range s.Gateways {
		snap.Gateways = append(snap.Gateways, gw.ID)
	}
	snap.SyncSeq = s.Seq
	snap.EpochFloor = s.EpochFloor
	return out, nil
}

// partitionMeta is what the coordinator's meta values say of partitions:
// their flags, outside leases, the unowned blocks' entries (live: those
// true at their partition's stored epoch, found by restoreGroup) and the
// bulk blocks' entries (bulkLive: those above their partition's stored
// epoch; bulkSeen: those whose partition has records of its own).
type partitionMeta struct {
	flags    map[partKey]partitionFlags
	outside  map[partKey]bool
	unowned  map[partKey]uint64
	live     map[partKey]bool
	bulk     map[partKey]bulkEntry
	bulkLive map[partKey]bool
	bulkSeen map[partKey]bool
}

// readMeta decodes the coordinator's meta values: topics go straight into
// snap, the unowned blocks into blocks; partition flags, outside leases
// and the blocks' entries are returned by partition.
func readMeta(meta map[string][]byte, snap *group.Snapshot, blocks unownedBlocks, bulk bulkBlocks) (partitionMeta, error) {
	m := partitionMeta{flags: map[partKey]partitionFlags{}, outside: map[partKey]bool{}, unowned: map[partKey]uint64{}, live: map[partKey]bool{},
		bulk: map[partKey]bulkEntry{}, bulkLive: map[partKey]bool{}, bulkSeen: map[partKey]bool{}}
	for name, value := range meta {
		switch {
		case strings.HasPrefix(name, metaTopic):
			n, err := strconv.ParseInt(string(value), 10, 32)
			if err != nil {
				return m, fmt.Errorf("meta %q: %w", name, err)
			}
			snap.Topics = append(snap.Topics, group.TopicRecord{Topic: strings.TrimPrefix(name, metaTopic), Partitions: int32(n)})
		case strings.HasPrefix(name, metaPartitionFlags):
			k, ok := parseMetaName(name, metaPartitionFlags)
			var f partitionFlags
			if !ok || json.Unmarshal(value, &f) != nil {
				return m, fmt.Errorf("meta %q: malformed partition flags", name)
			}
			m.flags[k] = f
		case strings.HasPrefix(name, metaLeaseOutside):
			k, ok := parseMetaName(name, metaLeaseOutside)
			if !ok {
				return m, fmt.Errorf("meta %q: malformed lease key", name)
			}
			m.outside[k] = string(value) == "true"
		case strings.HasPrefix(name, metaUnowned):
			if err := readBlock(name, metaUnowned, value, decodeBlock, blocks, m.unowned); err != nil {
				return m, err
			}
		case strings.HasPrefix(name, metaBulk):
			if err := readBlock(name, metaBulk, value, decodeBulkBlock, bulk, m.bulk); err != nil {
				return m, err
			}
		}
	}
	return m, nil
}

// keepLive drops the stale entries (their partition's stored epoch is
// another, or it has none) from the Driver's copy; the blocks stay.
func (b blocks[V]) keepLive(live map[partKey]bool) {
	for k, entries := range b {
		for p := range entries {
			if !live[partKey{k.group, k.topic, p}] {
				delete(entries, p)
			}
		}
	}
}

func restoreGroup(snap *group.Snapshot, g store.GroupRecords, m partitionMeta) error {
	if g.Config != nil {
		var stored storedGroup
		if err := json.Unmarshal(g.Config.Config, &stored); err != nil {
			return fmt.Errorf("group %q config: %w", g.Group, err)
		}
		snap.Groups = append(snap.Groups, group.GroupRecord{Group: g.Group, Config: stored.GroupConfig, Creator: stored.Creator, CreatorName: stored.CreatorName})
	}
	for _, m := range g.Members {
		snap.Members = append(snap.Members, group.MemberRecord{
			Group: g.Group, MemberID: m.ID, InstanceID: m.InstanceID, ClientID: m.ClientID,
			Topics: m.Topics, TopicPattern: m.TopicPattern,
			SessionTimeout: time.Duration(m.SessionTimeoutMs) * time.Millisecond,
			Credential:     group.Credential(m.Credential),
		})
	}
	for _, p := range g.Partitions {
		key := partKey{g.Group, p.Topic, p.Partition}
		e, inBulk := m.bulk[key]
		if inBulk {
			m.bulkSeen[key] = true
		}
		switch epoch, ok := m.unowned[key]; {
		case inBulk && e.epoch > p.Epoch: // a bulk block's live entry (bulk.go)
			m.bulkLive[key] = true
			snap.Partitions = append(snap.Partitions, e.record(key))
		case ok && p.Epoch == epoch: // an unowned block's entry (unowned.go)
			m.live[key] = true
			snap.Partitions = append(snap.Partitions, group.PartitionRecord{
				Group: key.group, Topic: key.topic, Partition: key.partition, Epoch: epoch, State: group.Unowned,
			})
		case p.Epoch > 0 || p.State != nil:
			snap.Partitions = append(snap.Partitions, partitionRecord(key, p, m.flags[key]))
		}
		if p.Offset != nil {
			snap.Offsets = append(snap.Offsets, group.OffsetRecord{
				Group: g.Group, Topic: p.Topic, Partition: p.Partition, Offset: p.Offset.Offset, Metadata: p.Offset.Metadata,
				Epoch: p.Offset.Epoch,
			})
		}
		if p.Lease != nil {
			snap.Leases = append(snap.Leases, group.LeaseRecord{
				Group: g.Group, Topic: p.Topic, Partition: p.Partition,
				Holder: p.Lease.Holder, Outside: m.outside[key], Until: fromMilli(p.Lease.ExpiresAtMs),
			})
		}
	}
	return nil
}

// restoreBulkOnly restores the partitions that have a bulk entry and no
// records of their own (a first grant written in bulk): their entries
// are live (above no stored epoch), in key order.
func restoreBulkOnly(snap *group.Snapshot, m partitionMeta) {
	var keys []partKey
	for k := range m.bulk {
		if !m.bulkSeen[k] {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b partKey) int {
		return compareBlocks(blockKey{a.group, a.topic, a.partition}, blockKey{b.group, b.topic, b.partition})
	})
	for _, k := range keys {
		m.bulkLive[k] = true
		snap.Partitions = append(snap.Partitions, m.bulk[k].record(k))
	}
}

func partitionRecord(key partKey, p store.PartitionRecord, f partitionFlags) group.PartitionRecord {
	r := group.PartitionRecord{Group: key.group, Topic: key.topic, Partition: key.partition, Epoch: p.Epoch, State: group.Unowned}
	if s := p.State; s != nil {
		r.State = group.PartitionState(s.State)
		r.Holder, r.HolderEpoch, r.Target = s.Owner, s.Epoch, s.Target
		r.RevokeStarted = fromMilli(s.RevokedAtMs)
	}
	r.HolderOutside, r.TargetOutside, r.Released, r.Forced = f.HolderOutside, f.TargetOutside, f.Released, f.Forced
	return r
}
