package store

import (
	"encoding/binary"
	"fmt"
)

// PutDenied denies a capability id until exp (unix seconds).
func (w *Writer) PutDenied(jti string, exp int64) error {
	return w.do("save denied id", displayPart(jti), func() error {
		if err := checkID("jti", jti); err != nil {
			return err
		}
		return w.set(stringsKey(prefixDenied, jti), encodeInt(exp))
	})
}

// DeleteDenied removes a denied id.
func (w *Writer) DeleteDenied(jti string) error {
	return w.do("delete denied id", displayPart(jti), func() error {
		return w.delete(stringsKey(prefixDenied, jti))
	})
}

// PutRevokedMember revokes a member's capabilities until until (unix s).
func (w *Writer) PutRevokedMember(group, memberID string, until int64) error {
	return w.do("save revoked member", displayPart(group)+"/"+displayPart(memberID), func() error {
		if err := checkID("group", group); err != nil {
			return err
		}
		if err := checkID("member id", memberID); err != nil {
			return err
		}
		return w.set(stringsKey(prefixRevokedMember, group, memberID), encodeInt(until))
	})
}

// DeleteRevokedMember lifts a member revocation.
func (w *Writer) DeleteRevokedMember(group, memberID string) error {
	return w.do("delete revoked member", displayPart(group)+"/"+displayPart(memberID), func() error {
		return w.delete(stringsKey(prefixRevokedMember, group, memberID))
	})
}

// PutQoS adds or replaces a QoS override: its JSON and expiry (unix s).
func (w *Writer) PutQoS(id string, config []byte, until int64) error {
	return w.do("save qos override", displayPart(id), func() error {
		if err := checkID("qos override id", id); err != nil {
			return err
		}
		if err := validateJSON(config); err != nil {
			return err
		}
		return w.set(stringsKey(prefixQoS, id), encodeQoS(config, until))
	})
}

// DeleteQoS removes a QoS override.
func (w *Writer) DeleteQoS(id string) error {
	return w.do("delete qos override", displayPart(id), func() error {
		return w.delete(stringsKey(prefixQoS, id))
	})
}

// PutGateway records a gateway; when it is already known, the earlier
// first-seen time is kept.
func (w *Writer) PutGateway(id string, firstSeenMs int64) error {
	return w.do("save gateway", displayPart(id), func() error {
		if err := checkID("gateway id", id); err != nil {
			return err
		}
		key := stringsKey(prefixGateway, id)
		var stored int64
		found, err := lookup(w.b, key, func(value []byte) error {
			var err error
			stored, err = decodeInt(value)
			return err
		})
		if err != nil || (found && stored <= firstSeenMs) {
			return err
		}
		return w.set(key, encodeInt(firstSeenMs))
	})
}

// DeleteGateway forgets a gateway.
func (w *Writer) DeleteGateway(id string) error {
	return w.do("delete gateway", displayPart(id), func() error {
		return w.delete(stringsKey(prefixGateway, id))
	})
}

// SaveSeq stores the sync sequence. A lower one than stored fails with
// ErrSeqRegression; an equal one is a no-op.
func (w *Writer) SaveSeq(seq uint64) error {
	return w.do("save meta", MetaSyncSeq, func() error {
		key := stringsKey(prefixMeta, MetaSyncSeq)
		var stored uint64
		found, err := lookup(w.b, key, func(value []byte) error {
			var err error
			stored, err = decodeSeq(value)
			return err
		})
		switch {
		case err != nil:
			return err
		case found && seq < stored:
			return fmt.Errorf("%w: stored %d, new %d", ErrSeqRegression, stored, seq)
		case found && seq == stored:
			return nil
		}
		return w.set(key, encodeBytes(binary.AppendUvarint(nil, seq)))
	})
}

// decodeSeq reads the sync_seq meta value: bytes holding one uvarint.
func decodeSeq(value []byte) (uint64, error) {
	p, err := decodeBytes(value)
	if err != nil {
		return 0, err
	}
	seq, n := binary.Uvarint(p)
	if n <= 0 || n != len(p) {
		return 0, fmt.Errorf("bad sync sequence")
	}
	return seq, nil
}

// PutMeta stores a small named value. Use SaveSeq for MetaSyncSeq.
func (w *Writer) PutMeta(name string, value []byte) error {
	return w.do("save meta", displayPart(name), func() error {
		if err := checkMetaName(name); err != nil {
			return err
		}
		return w.set(stringsKey(prefixMeta, name), encodeBytes(value))
	})
}

// DeleteMeta removes a named value (not MetaSyncSeq).
func (w *Writer) DeleteMeta(name string) error {
	return w.do("delete meta", displayPart(name), func() error {
		if err := checkMetaName(name); err != nil {
			return err
		}
		return w.delete(stringsKey(prefixMeta, name))
	})
}

func checkMetaName(name string) error {
	switch name {
	case MetaSyncSeq:
		return fmt.Errorf("%w: %s is written only by SaveSeq", ErrInvalid, MetaSyncSeq)
	case MetaEpochFloor:
		return fmt.Errorf("%w: %s is written only by ForgetPartition", ErrInvalid, MetaEpochFloor)
	case MetaLogSettings:
		return fmt.Errorf("%w: %s is written only by a log's new leader", ErrInvalid, MetaLogSettings)
	}
	return checkID("meta name", name)
}

// PutKeyRing stores the serialised signing key ring.
func (w *Writer) PutKeyRing(ring []byte) error {
	return w.do("save key ring", "", func() error {
		if len(ring) == 0 {
			return fmt.Errorf("%w: empty key ring", ErrInvalid)
		}
		return w.set([]byte(prefixKeyRing), encodeBytes(ring))
	})
}

// LayoutBulkBlocks is the key layout (keys.go) of a store in which the
// coordinator keeps partitions in bulk blocks.
const LayoutBulkBlocks = 2

// RaiseLayout raises the store's layout record to version (keys.go) when
// it is lower, in this batch: call it in the transaction that writes the
// first record a build reading an older layout would misread. Versions
// this build does not know are refused (ErrInvalid).
func (w *Writer) RaiseLayout(version uint64) error {
	return w.do("raise layout", prefixLayout, func() error {
		if version < layoutBase || version > layoutVersion {
			return fmt.Errorf("%w: key layout version %d, this build writes %d to %d", ErrInvalid, version, layoutBase, layoutVersion)
		}
		stored, found, err := w.storedUint([]byte(prefixLayout))
		if err != nil || (found && stored >= version) {
			return err
		}
		return w.set([]byte(prefixLayout), encodeUint(version))
	})
}
