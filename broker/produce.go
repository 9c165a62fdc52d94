package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ErrNoRecords is Produce's answer to an empty batch.
var ErrNoRecords = errors.New("broker: produce: no records")

// Codecs of Config.ProduceCompression.
const (
	CompressionNone   = "none"
	CompressionGzip   = "gzip"
	CompressionSnappy = "snappy"
	CompressionLZ4    = "lz4"
	CompressionZstd   = "zstd"
)

// producerCompression is kgo's codec for a ProduceCompression name. kgo's
// own default (snappy, then none) is never used: KafkaJS, which has no
// snappy codec unless the app registers one, failed on every batch of
// more than one record the gateway wrote.
func producerCompression(name string) (kgo.CompressionCodec, error) {
	switch name {
	case CompressionNone:
		return kgo.NoCompression(), nil
	case CompressionGzip:
		return kgo.GzipCompression(), nil
	case CompressionSnappy:
		return kgo.SnappyCompression(), nil
	case CompressionLZ4:
		return kgo.Lz4Compression(), nil
	case CompressionZstd:
		return kgo.ZstdCompression(), nil
	}
	return kgo.CompressionCodec{}, fmt.Errorf("broker.produce_compression: must be one of none, gzip, snappy, lz4, zstd, got %q", name)
}

// Produce appends recs, in order, to topic/partition on its leader with
// acks=all (idempotent, no linger) and returns the offset of the first
// record. It sets Topic and Partition on every record, and Offset once
// written; recs must not be touched until Produce returns.
//
// Produce waits at most RequestTimeout. When it gives up (or ctx ends)
// while a request is already with the broker, the records may still be
// written: the caller sees a retriable error and may produce them again,
// which is at-least-once, as for any Kafka producer that retries.
func (c *Client) Produce(ctx context.Context, topic string, partition int32, recs []*kgo.Record) (baseOffset int64, err error) {
	if len(recs) == 0 {
		return 0, ErrNoRecords
	}
	bounded, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	n, err := c.meta.partitionCount(bounded, topic)
	if err != nil {
		return 0, c.boundedError(ctx, "produce", err)
	}
	if partition < 0 || partition >= n {
		return 0, wrapError("produce", kerr.UnknownTopicOrPartition)
	}
	if err := c.produce(bounded, topic, partition, recs); err != nil {
		return 0, c.boundedError(ctx, "produce", err)
	}
	// An idempotent producer keeps one partition's records in order, so
	// the first record has the lowest offset.
	return recs[0].Offset, nil
}

// produce hands recs to kgo's producer and waits for all of them, or for
// ctx: kgo will not fail records already sent idempotently, so we stop
// waiting instead.
func (c *Client) produce(ctx context.Context, topic string, partition int32, recs []*kgo.Record) error {
	var (
		mu       sync.Mutex
		firstErr error
		left     = len(recs)
		done     = make(chan struct{})
	)
	promise := func(_ *kgo.Record, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil && firstErr == nil {
			firstErr = err
		}
		if left--; left == 0 {
			close(done)
		}
	}
	for _, r := range recs {
		r.Topic, r.Partition = topic, partition
		c.kgo.Produce(ctx, r, promise)
	}
	select {
	case <-done:
		mu.Lock()
		defer mu.Unlock()
		return firstErr
	case <-ctx.Done():
		return ctx.Err()
	}
}
