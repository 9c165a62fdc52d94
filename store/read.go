package store

import (
	"fmt"

	"github.com/dgraph-io/badger/v4"
)

// Epoch returns the stored epoch of a partition, 0 if none.
func (s *Store) Epoch(group, topic string, partition int32) (uint64, error) {
	var epoch uint64
	err := s.view(func(txn *badger.Txn) error {
		_, err := lookup(badgerBatch{txn}, partitionKey(prefixEpoch, group, topic, partition), func(value []byte) error {
			var err error
			epoch, err = decodeUint(value)
			return err
		})
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("store: read epoch %s: %w", partitionName(group, topic, partition), err)
	}
	return epoch, nil
}

// Offset returns the committed offset of a partition; found is false when
// nothing was committed.
func (s *Store) Offset(group, topic string, partition int32) (offset CommittedOffset, found bool, err error) {
	err = s.view(func(txn *badger.Txn) error {
		found, err = lookup(badgerBatch{txn}, partitionKey(prefixOffset, group, topic, partition), func(value []byte) error {
			var err error
			offset, err = decodeOffset(value)
			return err
		})
		return err
	})
	if err != nil {
		return CommittedOffset{}, false, fmt.Errorf("store: read offset %s: %w", partitionName(group, topic, partition), err)
	}
	return offset, found, nil
}

// PartitionOffset is one committed offset of a group.
type PartitionOffset struct {
	Topic     string
	Partition int32
	CommittedOffset
}

// Offsets returns a group's committed offsets sorted by topic, partition.
func (s *Store) Offsets(group string) ([]PartitionOffset, error) {
	var offsets []PartitionOffset
	prefix := stringsKey(prefixOffset, group)
	err := s.view(func(txn *badger.Txn) error {
		return scan(txn, prefix, func(key parsedKey, value []byte) error {
			offset, err := decodeOffset(value)
			offsets = append(offsets, PartitionOffset{key.parts[1], key.partition, offset})
			return err
		})
	})
	if err != nil {
		return nil, fmt.Errorf("store: read offsets %s: %w", displayPart(group), err)
	}
	return offsets, nil
}

// scan calls fn for every record under prefix, in key order. Keys that do
// not parse and values fn cannot decode give ErrCorrupt naming the key.
func scan(txn *badger.Txn, prefix []byte, fn func(key parsedKey, value []byte) error) error {
	options := badger.DefaultIteratorOptions
	options.Prefix = prefix
	it := txn.NewIterator(options)
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		item := it.Item()
		key := item.Key()
		parsed, err := parseKey(key)
		if err != nil {
			return corrupt(key, err)
		}
		var decodeErr error
		if err := item.Value(func(value []byte) error {
			decodeErr = fn(parsed, value)
			return nil
		}); err != nil {
			return fmt.Errorf("key %s: %w", keyName(key), err)
		}
		if decodeErr != nil {
			return corrupt(key, decodeErr)
		}
	}
	return nil
}

// PruneDenied deletes denied ids whose exp is before nowUnix and returns
// how many it deleted. Callers pass now minus leeway and clock skew so a
// gateway never sees a denied id vanish while its token is still valid.
// Deletions are committed synchronously, in several transactions when
// there are many (each deletion stands on its own).
func (s *Store) PruneDenied(nowUnix int64) (int, error) {
	var candidates [][]byte
	err := s.view(func(txn *badger.Txn) error {
		return scan(txn, []byte(prefixDenied), func(key parsedKey, value []byte) error {
			exp, err := decodeInt(value)
			if err == nil && exp < nowUnix {
				candidates = append(candidates, stringsKey(prefixDenied, key.parts[0]))
			}
			return err
		})
	})
	if err != nil {
		return 0, fmt.Errorf("store: prune denied ids: %w", err)
	}
	deleted := 0
	for start := 0; start < len(candidates); start += pruneChunk {
		chunk := candidates[start:min(start+pruneChunk, len(candidates))]
		n, err := s.deleteExpired(chunk, nowUnix)
		deleted += n
		if err != nil {
			return deleted, fmt.Errorf("store: prune denied ids: %w", err)
		}
	}
	return deleted, nil
}

const pruneChunk = 10_000

// deleteExpired deletes the denied ids among keys that are still expired
// inside the write transaction (an Update since the scan may have denied
// one again with a later exp).
func (s *Store) deleteExpired(keys [][]byte, nowUnix int64) (int, error) {
	deleted := 0
	err := s.Update(func(w *Writer) error {
		deleted = 0
		for _, key := range keys {
			var exp int64
			found, err := lookup(w.b, key, func(value []byte) error {
				var err error
				exp, err = decodeInt(value)
				return err
			})
			if err != nil {
				return err
			}
			if !found || exp >= nowUnix {
				continue
			}
			if err := w.delete(key); err != nil {
				return err
			}
			deleted++
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return deleted, nil
}
