package store

// Bridges for the external tests: raw access to keys and badger so they can
// plant corrupt values and check limits.

import "github.com/dgraph-io/badger/v4"

func EpochKey(group, topic string, partition int32) []byte {
	return partitionKey(prefixEpoch, group, topic, partition)
}

func StateKey(group, topic string, partition int32) []byte {
	return partitionKey(prefixState, group, topic, partition)
}

func OffsetKey(group, topic string, partition int32) []byte {
	return partitionKey(prefixOffset, group, topic, partition)
}

func MemberKey(group, memberID string) []byte { return stringsKey(prefixMember, group, memberID) }

func LayoutKey() []byte { return []byte(prefixLayout) }

const FormatVersion = formatVersion

// PutRaw writes a raw key and value, bypassing every check.
func (s *Store) PutRaw(key, value []byte) error {
	return s.db.Update(func(txn *badger.Txn) error { return txn.Set(key, value) })
}

// BadgerMaxBatchCount is badger's own per-transaction entry limit.
func (s *Store) BadgerMaxBatchCount() int64 { return s.db.MaxBatchCount() }

// BadgerMaxBatchSize is badger's own per-transaction byte limit.
func (s *Store) BadgerMaxBatchSize() int64 { return s.db.MaxBatchSize() }

// IsLogKey says whether key is a store key or a log-only key.
func IsLogKey(key []byte) bool {
	if string(key) == keyLogCommit || string(key) == keyLogLeader {
		return true
	}
	_, err := parseKey(key)
	return err == nil
}

func Seal(k *KEK, recordKey, plaintext []byte) []byte { return k.seal(recordKey, plaintext) }

func OpenSealed(k *KEK, recordKey, envelope []byte) ([]byte, error) {
	return k.open(recordKey, envelope)
}
