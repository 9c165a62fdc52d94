package store

import (
	"encoding/binary"
	"fmt"
)

// PutEpoch raises the epoch of a partition. A lower epoch than the stored
// one fails with ErrEpochRegression; an equal one is a no-op. A partition
// without a stored epoch (new, or forgotten) starts at the epoch floor
// (MetaEpochFloor) at least, so the first epoch it grants is above every
// epoch ever forgotten: an epoch is never reissued, even for a group
// forgotten and created again, because a gateway may still hold a fence
// at it.
func (w *Writer) PutEpoch(group, topic string, partition int32, epoch uint64) error {
	return w.doPartition("save epoch", group, topic, partition, func() error {
		stored, found, err := w.checkEpoch(group, topic, partition, epoch)
		if err != nil || (found && epoch == stored) {
			return err
		}
		return w.set(partitionKey(prefixEpoch, group, topic, partition), encodeUint(epoch))
	})
}

// CheckEpoch runs PutEpoch's checks of epoch against the partition's
// stored epoch and the epoch floor, writing nothing, and returns the
// stored epoch (0 when it has none). For a caller that keeps a
// partition's newer epoch in a value of its own (the coordinator's bulk
// blocks) and must keep the store's monotonic rule for it.
func (w *Writer) CheckEpoch(group, topic string, partition int32, epoch uint64) (stored uint64, err error) {
	err = w.doPartition("check epoch", group, topic, partition, func() error {
		stored, _, err = w.checkEpoch(group, topic, partition, epoch)
		return err
	})
	return stored, err
}

func (w *Writer) checkEpoch(group, topic string, partition int32, epoch uint64) (stored uint64, found bool, err error) {
	if err := checkPartition(group, topic, partition); err != nil {
		return 0, false, err
	}
	stored, found, err = w.storedUint(partitionKey(prefixEpoch, group, topic, partition))
	switch {
	case err != nil:
		return 0, false, err
	case found && epoch < stored:
		return 0, false, fmt.Errorf("%w: stored %d, new %d", ErrEpochRegression, stored, epoch)
	case !found && epoch > 0:
		floor, err := w.epochFloor()
		if err != nil {
			return 0, false, err
		}
		if epoch < floor {
			return 0, false, fmt.Errorf("%w: epoch %d of a new partition is below the epoch floor %d", ErrEpochRegression, epoch, floor)
		}
	}
	return stored, found, nil
}

// ForgetPartition removes a partition's epoch and handoff state (a group
// nobody uses any more is forgotten), raising the epoch floor to its
// epoch first, so the partition — should its group come back — and every
// new partition only take epochs above it.
func (w *Writer) ForgetPartition(group, topic string, partition int32) error {
	return w.ForgetPartitionAt(group, topic, partition, 0)
}

// ForgetPartitionAt is ForgetPartition for a partition whose newest epoch
// the caller may keep in a value of its own (the coordinator's bulk
// blocks, CheckEpoch): the floor is raised to epoch too when it is above
// the stored one. Unlike a PutEpoch of it first, a floor already above
// epoch is no error: it covers epoch as it is.
func (w *Writer) ForgetPartitionAt(group, topic string, partition int32, epoch uint64) error {
	return w.doPartition("forget partition", group, topic, partition, func() error {
		if err := checkPartition(group, topic, partition); err != nil {
			return err
		}
		key := partitionKey(prefixEpoch, group, topic, partition)
		stored, found, err := w.storedUint(key)
		if err != nil {
			return err
		}
		if found {
			epoch = max(epoch, stored)
		}
		floor, err := w.epochFloor()
		if err != nil {
			return err
		}
		if epoch > floor {
			if err := w.set(stringsKey(prefixMeta, MetaEpochFloor), encodeBytes(binary.AppendUvarint(nil, epoch))); err != nil {
				return err
			}
			w.floor = epoch
		}
		if err := w.delete(key); err != nil {
			return err
		}
		return w.delete(partitionKey(prefixState, group, topic, partition))
	})
}

// epochFloor reads MetaEpochFloor (0 when never written), once a batch.
func (w *Writer) epochFloor() (uint64, error) {
	if w.floorKnown {
		return w.floor, nil
	}
	var floor uint64
	_, err := lookup(w.b, stringsKey(prefixMeta, MetaEpochFloor), func(value []byte) error {
		var err error
		floor, err = decodeSeq(value)
		return err
	})
	w.floor, w.floorKnown = floor, err == nil
	return floor, err
}

// PutPartitionState replaces the handoff state of a partition.
func (w *Writer) PutPartitionState(group, topic string, partition int32, state PartitionState) error {
	return w.doPartition("save partition state", group, topic, partition, func() error {
		if err := checkPartition(group, topic, partition); err != nil {
			return err
		}
		if err := validateState(state); err != nil {
			return err
		}
		return w.set(partitionKey(prefixState, group, topic, partition), encodeState(state))
	})
}

// DeletePartitionState removes the handoff state of a partition.
func (w *Writer) DeletePartitionState(group, topic string, partition int32) error {
	return w.doPartition("delete partition state", group, topic, partition, func() error {
		return w.delete(partitionKey(prefixState, group, topic, partition))
	})
}

// PutOffset records a commit. An offset below the stored one fails with
// ErrOffsetRegression (use ResetOffset for an admin reset); an equal one
// replaces metadata and epoch.
func (w *Writer) PutOffset(group, topic string, partition int32, offset CommittedOffset) error {
	return w.doPartition("save offset", group, topic, partition, func() error {
		return w.putOffset(group, topic, partition, offset, false)
	})
}

// ResetOffset records an offset set by an operator, allowed to go
// backwards.
func (w *Writer) ResetOffset(group, topic string, partition int32, offset CommittedOffset) error {
	return w.doPartition("reset offset", group, topic, partition, func() error {
		return w.putOffset(group, topic, partition, offset, true)
	})
}

func (w *Writer) putOffset(group, topic string, partition int32, offset CommittedOffset, reset bool) error {
	if err := checkPartition(group, topic, partition); err != nil {
		return err
	}
	if err := validateOffset(offset); err != nil {
		return err
	}
	key := partitionKey(prefixOffset, group, topic, partition)
	if !reset {
		var stored CommittedOffset
		found, err := lookup(w.b, key, func(value []byte) error {
			var err error
			stored, err = decodeOffset(value)
			return err
		})
		switch {
		case err != nil:
			return err
		case found && offset.Offset < stored.Offset:
			return fmt.Errorf("%w: stored %d, new %d", ErrOffsetRegression, stored.Offset, offset.Offset)
		}
	}
	return w.set(key, encodeOffset(offset))
}

// DeleteOffset removes a committed offset.
func (w *Writer) DeleteOffset(group, topic string, partition int32) error {
	return w.doPartition("delete offset", group, topic, partition, func() error {
		return w.delete(partitionKey(prefixOffset, group, topic, partition))
	})
}

// PutGroupConfig replaces a group's configuration; Config must be empty or
// valid JSON.
func (w *Writer) PutGroupConfig(group string, config GroupConfig) error {
	return w.do("save group config", displayPart(group), func() error {
		if err := checkID("group", group); err != nil {
			return err
		}
		if err := validateJSON(config.Config); err != nil {
			return err
		}
		return w.set(stringsKey(prefixGroupConfig, group), encodeGroupConfig(config))
	})
}

// DeleteGroupConfig removes a group's configuration.
func (w *Writer) DeleteGroupConfig(group string) error {
	return w.do("delete group config", displayPart(group), func() error {
		return w.delete(stringsKey(prefixGroupConfig, group))
	})
}

// PutMember adds or replaces a member (keyed by member.ID).
func (w *Writer) PutMember(group string, member Member) error {
	return w.do("save member", displayPart(group)+"/"+displayPart(member.ID), func() error {
		if err := checkID("group", group); err != nil {
			return err
		}
		if err := checkID("member id", member.ID); err != nil {
			return err
		}
		return w.set(stringsKey(prefixMember, group, member.ID), encodeMember(member))
	})
}

// DeleteMember removes a member.
func (w *Writer) DeleteMember(group, memberID string) error {
	return w.do("delete member", displayPart(group)+"/"+displayPart(memberID), func() error {
		return w.delete(stringsKey(prefixMember, group, memberID))
	})
}

// PutLease pins a partition to a holder.
func (w *Writer) PutLease(group, topic string, partition int32, lease Lease) error {
	return w.doPartition("save lease", group, topic, partition, func() error {
		if err := checkPartition(group, topic, partition); err != nil {
			return err
		}
		if err := checkID("lease holder", lease.Holder); err != nil {
			return err
		}
		return w.set(partitionKey(prefixLease, group, topic, partition), encodeLease(lease))
	})
}

// DeleteLease removes a partition's lease.
func (w *Writer) DeleteLease(group, topic string, partition int32) error {
	return w.doPartition("delete lease", group, topic, partition, func() error {
		return w.delete(partitionKey(prefixLease, group, topic, partition))
	})
}
