package store

import "context"

// The log backends (Kafka and its in-memory twin) share everything above
// the transport: the Writer and its checks, the materialized state, the
// commit records, the takeover sequence, the tail, the snapshots and the
// key wrapping. A transport only moves records; kafka.go and mem.go are
// the two.

// logRecord is one record of a shard's log: a store key (or a log-only
// key) and its stored value; a nil value is a tombstone (a delete).
type logRecord struct {
	key    []byte
	value  []byte
	offset int64 // set by the log: on read, and on commit for the last record
}

// logTransport is one shard of one log.
type logTransport interface {
	// name says which log and shard, for errors: "capgate-state/3".
	name() string
	// transactionalID is the writer identity the log fences on.
	transactionalID() string
	// newWriter makes a writer; it writes nothing and fences nobody until
	// fence.
	newWriter() (logWriter, error)
	// newReader reads committed records from offset from on.
	newReader(from int64) (logReader, error)
	// endCommit is where the shard's log ends now, as a commit record
	// offset: a follower that applied a commit record at or past it read
	// every transaction committed before the call (Kafka: the high
	// watermark − 2, a commit record before its transaction marker; in
	// memory: the last record).
	endCommit(ctx context.Context) (int64, error)
	// saveSnapshot stores a snapshot of the shard and makes it the one
	// loadSnapshot finds; loadSnapshot returns found false when there is
	// none (or none that can be trusted).
	saveSnapshot(ctx context.Context, snap *logSnapshot) error
	loadSnapshot(ctx context.Context) (snap *logSnapshot, found bool, err error)
	close() error
}

// logWriter appends transactions to one shard.
type logWriter interface {
	// fence makes this writer the shard's only one: the next commit of any
	// earlier writer fails fenced, and a transaction one had open is
	// aborted (Kafka: InitProducerID on the shard's transactional id).
	fence(ctx context.Context) error
	// commit appends records as ONE transaction, all or nothing, and
	// returns the offset the log gave the last one. A deposed writer gets a
	// *FencedError and nothing of the records is ever visible.
	commit(ctx context.Context, records []logRecord) (last int64, err error)
	close() error
}

// logReader reads the committed records of one shard in log order
// (Kafka: read_committed, so aborted transactions never show).
type logReader interface {
	// poll returns the next records, at least one, waiting for them until
	// ctx is done.
	poll(ctx context.Context) ([]logRecord, error)
	close()
}
