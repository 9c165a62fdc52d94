package client

import (
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/client/session"
)

// Partition names one partition of one topic.
type Partition = session.Partition

// Header is one record header.
type Header = api.Header

// Record is one Kafka record delivered by Poll. Epoch is the partition
// epoch it was read under.
type Record struct {
	Topic     string
	Partition int32
	Offset    int64
	Timestamp time.Time
	Key       []byte
	Value     []byte
	Headers   []Header
	Epoch     uint64
}

// size is what a record counts against the buffer bound.
func (r *Record) size() int64 {
	n := int64(len(r.Key) + len(r.Value))
	for _, h := range r.Headers {
		n += int64(len(h.Key) + len(h.Value))
	}
	return n
}

// flatten concatenates delivered batches' records; one batch's records
// are returned as they are (a fetch's slice is the caller's: copying
// thousands of records, each with pointers, was a third of a bulk
// consumer's CPU).
func flatten(batches []session.Batch) []Record {
	if len(batches) == 1 {
		return batches[0].Payload.([]Record)
	}
	n := 0
	for _, b := range batches {
		n += b.Records
	}
	if n == 0 {
		return nil
	}
	out := make([]Record, 0, n)
	for _, b := range batches {
		out = append(out, b.Payload.([]Record)...)
	}
	return out
}
