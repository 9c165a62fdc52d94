package store

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/dgraph-io/badger/v4"
)

// Snapshot is everything stored, as the coordinator needs it on restart.
// Slices are sorted by their keys (group, topic, partition, id); nil
// pointers mean "nothing stored".
type Snapshot struct {
	Layout         uint64            // key layout version (keys.go); 0 only for a log not yet opened by a writer
	Seq            uint64            // sync sequence, 0 if never saved
	EpochFloor     uint64            // highest epoch of a forgotten partition, 0 if none
	KeyRing        []byte            // nil if never saved
	Meta           map[string][]byte // named values other than MetaSyncSeq and MetaEpochFloor
	Groups         []GroupRecords    // by group
	Denied         []Denied          // by JTI
	RevokedMembers []RevokedMember   // by group, member id
	QoS            []QoSOverride     // by id
	Gateways       []Gateway         // by id
}

// GroupRecords is one group's stored state. A group appears as long as any
// of its records exists; epochs are deleted only by ForgetPartition, so a
// group once used appears until it is forgotten.
type GroupRecords struct {
	Group      string
	Config     *GroupConfig
	Members    []Member          // by id
	Partitions []PartitionRecord // by topic, partition
}

// PartitionRecord merges the records of one partition.
type PartitionRecord struct {
	Topic     string
	Partition int32
	Epoch     uint64 // 0 if none stored
	State     *PartitionState
	Offset    *CommittedOffset
	Lease     *Lease
}

// Load reads the whole store in one consistent view.
func (s *Store) Load() (*Snapshot, error) {
	builder := newSnapshotBuilder()
	err := s.view(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.DefaultIteratorOptions)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			key := item.Key()
			var addErr error
			if err := item.Value(func(value []byte) error {
				addErr = builder.addRecord(key, value)
				return nil
			}); err != nil {
				return fmt.Errorf("key %s: %w", keyName(key), err)
			}
			if addErr != nil {
				return addErr
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: load: %w", err)
	}
	return builder.finish(), nil
}

// view runs a read-only transaction unless the store is closed.
func (s *Store) view(fn func(txn *badger.Txn) error) error {
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	return s.db.View(fn)
}

type groupPartition struct {
	group, topic string
	partition    int32
}

type snapshotBuilder struct {
	snapshot   *Snapshot
	groups     map[string]*GroupRecords
	partitions map[groupPartition]*PartitionRecord
}

func newSnapshotBuilder() *snapshotBuilder {
	return &snapshotBuilder{
		snapshot:   &Snapshot{Meta: map[string][]byte{}},
		groups:     map[string]*GroupRecords{},
		partitions: map[groupPartition]*PartitionRecord{},
	}
}

// addRecord decodes one stored record into the snapshot; a key or value
// that does not decode gives ErrCorrupt naming the key. Every backend's
// Load feeds its records through here, in key order.
func (b *snapshotBuilder) addRecord(key, value []byte) error {
	parsed, err := parseKey(key)
	if err != nil {
		return corrupt(key, err)
	}
	if err := b.add(parsed, value); err != nil {
		return corrupt(key, err)
	}
	return nil
}

// add decodes one record into the snapshot.
func (b *snapshotBuilder) add(key parsedKey, value []byte) error {
	switch key.prefix {
	case prefixEpoch, prefixState, prefixOffset, prefixLease:
		return b.addPartition(key, value)
	case prefixGroupConfig:
		config, err := decodeGroupConfig(value)
		b.group(key.parts[0]).Config = &config
		return err
	case prefixMember:
		member, err := decodeMember(value)
		if err == nil && member.ID != key.parts[1] {
			err = fmt.Errorf("member id %q does not match its key", member.ID)
		}
		group := b.group(key.parts[0])
		group.Members = append(group.Members, member)
		return err
	}
	return b.addGlobal(key, value)
}

func (b *snapshotBuilder) addPartition(key parsedKey, value []byte) error {
	record := b.partition(groupPartition{key.parts[0], key.parts[1], key.partition})
	var err error
	switch key.prefix {
	case prefixEpoch:
		record.Epoch, err = decodeUint(value)
	case prefixState:
		var state PartitionState
		state, err = decodeState(value)
		record.State = &state
	case prefixOffset:
		var offset CommittedOffset
		offset, err = decodeOffset(value)
		record.Offset = &offset
	case prefixLease:
		var lease Lease
		lease, err = decodeLease(value)
		record.Lease = &lease
	}
	return err
}

func (b *snapshotBuilder) addGlobal(key parsedKey, value []byte) error {
	s := b.snapshot
	var err error
	switch key.prefix {
	case prefixDenied:
		denied := Denied{JTI: key.parts[0]}
		denied.Exp, err = decodeInt(value)
		s.Denied = append(s.Denied, denied)
	case prefixRevokedMember:
		revoked := RevokedMember{Group: key.parts[0], MemberID: key.parts[1]}
		revoked.Until, err = decodeInt(value)
		s.RevokedMembers = append(s.RevokedMembers, revoked)
	case prefixQoS:
		qos := QoSOverride{ID: key.parts[0]}
		qos.Config, qos.Until, err = decodeQoS(value)
		s.QoS = append(s.QoS, qos)
	case prefixGateway:
		gateway := Gateway{ID: key.parts[0]}
		gateway.FirstSeenMs, err = decodeInt(value)
		s.Gateways = append(s.Gateways, gateway)
	case prefixMeta:
		err = b.addMeta(key.parts[0], value)
	case prefixKeyRing:
		s.KeyRing, err = decodeBytes(value)
	case prefixLayout:
		s.Layout, err = decodeUint(value) // checked by Open
	}
	return err
}

func (b *snapshotBuilder) addMeta(name string, value []byte) error {
	switch name {
	case MetaSyncSeq:
		seq, err := decodeSeq(value)
		b.snapshot.Seq = seq
		return err
	case MetaEpochFloor:
		floor, err := decodeSeq(value)
		b.snapshot.EpochFloor = floor
		return err
	}
	p, err := decodeBytes(value)
	b.snapshot.Meta[name] = p
	return err
}

func (b *snapshotBuilder) group(name string) *GroupRecords {
	group, ok := b.groups[name]
	if !ok {
		group = &GroupRecords{Group: name}
		b.groups[name] = group
	}
	return group
}

func (b *snapshotBuilder) partition(id groupPartition) *PartitionRecord {
	record, ok := b.partitions[id]
	if !ok {
		record = &PartitionRecord{Topic: id.topic, Partition: id.partition}
		b.partitions[id] = record
		b.group(id.group)
	}
	return record
}

// finish sorts everything. Global slices and members are already in key
// order (records are fed in key order); groups and partitions come from
// maps.
func (b *snapshotBuilder) finish() *Snapshot {
	for id, record := range b.partitions {
		group := b.groups[id.group]
		group.Partitions = append(group.Partitions, *record)
	}
	for _, group := range b.groups {
		slices.SortFunc(group.Partitions, func(x, y PartitionRecord) int {
			return cmp.Or(cmp.Compare(x.Topic, y.Topic), cmp.Compare(x.Partition, y.Partition))
		})
		b.snapshot.Groups = append(b.snapshot.Groups, *group)
	}
	slices.SortFunc(b.snapshot.Groups, func(x, y GroupRecords) int { return cmp.Compare(x.Group, y.Group) })
	return b.snapshot
}
