package store

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Snapshots on Kafka: the chunks go to the shard's partition of the
// snapshot topic (plain idempotent produce, never in a transaction, so a
// long snapshot never holds back the state topic's last stable offset);
// then the pointer — a Kafka group offset of group prefix + "-snapshots"
// on that partition, whose offset is the first chunk's and whose metadata
// describes the snapshot — is committed. A reader fetches the pointer
// (one OffsetFetch), reads the chunks between first and last, and checks
// them whole; anything amiss means "no snapshot", and the whole log is
// replayed. A deposed writer that still commits a pointer only points
// readers at an older, still true, state: they replay a longer tail.

// snapshotPointer is the group offset metadata of the latest snapshot.
type snapshotPointer struct {
	Version   int    `json:"v"`
	ID        string `json:"id"`
	Covers    int64  `json:"covers"`   // state topic offset of the last commit record included
	Last      int64  `json:"last"`     // snapshot topic offset of the last chunk (first is the committed offset)
	Chunks    int    `json:"chunks"`   // chunk count
	Entries   int    `json:"entries"`  // store keys
	Sum       string `json:"sha256"`   // over the chunks, in order
	WrittenMs int64  `json:"ms"`       // when it was taken
	TopicID   string `json:"topic_id"` // the state topic it belongs to
}

func (t *kafkaTransport) snapshotGroup() string { return t.opts.TransactionalIDPrefix + "-snapshots" }

func (t *kafkaTransport) saveSnapshot(ctx context.Context, snap *logSnapshot) error {
	records := make([]*kgo.Record, len(snap.chunks))
	for i, chunk := range snap.chunks {
		records[i] = &kgo.Record{Topic: t.opts.SnapshotTopic, Partition: t.opts.Shard, Key: []byte(snap.id), Value: chunk}
	}
	if err := produceBounded(ctx, t.base, records); err != nil {
		return fmt.Errorf("produce chunks: %w", err)
	}
	pointer := snapshotPointer{
		Version: 1, ID: snap.id, Covers: snap.covers, Last: records[len(records)-1].Offset,
		Chunks: len(snap.chunks), Entries: snap.entries, Sum: hex.EncodeToString(snap.sum[:]),
		WrittenMs: snap.writtenMs, TopicID: t.topicID.String(),
	}
	metadata, err := json.Marshal(pointer)
	if err != nil {
		return err
	}
	offsets := kadm.Offsets{}
	offsets.Add(kadm.Offset{Topic: t.opts.SnapshotTopic, Partition: t.opts.Shard, At: records[0].Offset, LeaderEpoch: -1, Metadata: string(metadata)})
	committed, err := t.adm.CommitOffsets(ctx, t.snapshotGroup(), offsets)
	if err == nil {
		err = committed.Error()
	}
	if err != nil {
		return fmt.Errorf("commit pointer: %w", err)
	}
	return nil
}

// loadSnapshot finds the latest snapshot through its pointer and reads
// its chunks; found is false when there is none or it does not belong to
// this state topic.
func (t *kafkaTransport) loadSnapshot(ctx context.Context) (*logSnapshot, bool, error) {
	pointer, first, found, err := t.snapshotPointer(ctx)
	if err != nil || !found {
		return nil, false, err
	}
	if pointer.TopicID != t.topicID.String() {
		t.opts.Logger.Warn("snapshot belongs to another incarnation of the state topic; ignored")
		return nil, false, nil
	}
	ends, err := t.adm.ListEndOffsets(ctx, t.opts.Topic)
	if err != nil {
		return nil, false, fmt.Errorf("state topic end: %w", err)
	}
	if end, ok := ends.Lookup(t.opts.Topic, t.opts.Shard); !ok || end.Err != nil || pointer.Covers >= end.Offset {
		t.opts.Logger.Warn("snapshot covers more than the state topic holds; ignored")
		return nil, false, nil
	}
	snap := &logSnapshot{id: pointer.ID, covers: pointer.Covers, entries: pointer.Entries, writtenMs: pointer.WrittenMs}
	sum, err := hex.DecodeString(pointer.Sum)
	if err != nil || len(sum) != len(snap.sum) {
		return nil, false, nil
	}
	copy(snap.sum[:], sum)
	starts, err := t.adm.ListStartOffsets(ctx, t.opts.SnapshotTopic)
	if err != nil {
		return nil, false, fmt.Errorf("snapshot topic start: %w", err)
	}
	if start, ok := starts.Lookup(t.opts.SnapshotTopic, t.opts.Shard); !ok || start.Err != nil || first < start.Offset {
		t.opts.Logger.Warn("snapshot removed by retention; ignored")
		return nil, false, nil
	}
	if snap.chunks, err = t.readChunks(ctx, pointer, first); err != nil {
		return nil, false, err
	}
	return snap, true, nil
}

// snapshotPointer fetches the committed pointer of the shard.
func (t *kafkaTransport) snapshotPointer(ctx context.Context) (snapshotPointer, int64, bool, error) {
	var pointer snapshotPointer
	fetched, err := t.adm.FetchOffsets(ctx, t.snapshotGroup())
	if err != nil {
		if errors.Is(err, kerr.GroupIDNotFound) {
			return pointer, 0, false, nil
		}
		return pointer, 0, false, fmt.Errorf("fetch pointer: %w", err)
	}
	committed, ok := fetched.Lookup(t.opts.SnapshotTopic, t.opts.Shard)
	if !ok || committed.Err != nil || committed.At < 0 {
		return pointer, 0, false, nil
	}
	if err := json.Unmarshal([]byte(committed.Metadata), &pointer); err != nil || pointer.Version != 1 ||
		pointer.Chunks < 1 || pointer.Last < committed.At {
		t.opts.Logger.Warn("unreadable snapshot pointer; ignored")
		return pointer, 0, false, nil
	}
	return pointer, committed.At, true, nil
}

// readChunks reads the chunks of one snapshot: records with its id between
// first and last (another writer's chunks may sit in between).
func (t *kafkaTransport) readChunks(ctx context.Context, pointer snapshotPointer, first int64) ([][]byte, error) {
	cl, err := t.newConsumer(t.opts.SnapshotTopic, first)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var chunks [][]byte
	for {
		records, err := pollRecords(ctx, cl)
		if err != nil {
			return nil, fmt.Errorf("read snapshot: %w", err)
		}
		for _, r := range records {
			if r.offset > pointer.Last {
				return chunks, nil
			}
			if string(r.key) == pointer.ID {
				chunks = append(chunks, r.value)
			}
			if r.offset == pointer.Last {
				return chunks, nil
			}
		}
	}
}

// produceBounded is ProduceSync that returns at ctx's end: kgo's idempotent
// producer waits for an answer to a request it sent however long the
// cluster is unreachable (kafkaWriter.commit). Records still in flight
// then stay with the client until it is closed; a snapshot chunk that
// lands late is harmless (no pointer names it).
func produceBounded(ctx context.Context, cl *kgo.Client, records []*kgo.Record) error {
	done := make(chan error, 1)
	go func() { done <- cl.ProduceSync(ctx, records...).FirstErr() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", errUnfinished, context.Cause(ctx))
	}
}
