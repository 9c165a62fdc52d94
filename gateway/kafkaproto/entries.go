package kafkaproto

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A request naming partitions (Fetch, ListOffsets, Produce,
// OffsetCommit) or topics (Metadata) costs the listener memory and work
// per entry: kmsg allocates every decoded entry (a struct many times the
// entry's bytes on the wire — a Fetch partition is 16 bytes on the wire),
// and the handlers admit, route and answer each. Only the frame bounded
// them (kafka_max_request_bytes): one 8 MiB Fetch named ~500,000
// partitions and cost the gateway ~190 MB (redteam5 #1). Before kmsg
// decodes such a request, overEntries walks its arrays in the raw frame
// — reading counts and skipping entries, allocating nothing — and
// refuses one whose counts add up to more than kafka_max_request_partitions
// partitions or topic entries. The counts are checked as read, before
// the entries they announce are walked, so kmsg never sizes an array
// past the bound either. The group and admin requests' arrays (groups,
// members, protocols, assignments, topics, keys, filters) are walked
// and bounded the same way (groupRequest).
//
// The request is not answered: the connection closes, as for a frame
// over kafka_max_request_bytes and as Kafka closes one whose request it
// refuses to parse. Answering each entry INVALID_REQUEST would cost what
// the bound saves, and ListOffsets, Produce, Metadata and OffsetCommit
// have no error but a per-entry one; no Kafka client names more
// partitions in one request than it consumes or produces to on a broker.

// errTooManyEntries: a request names more partitions or topics than
// kafka_max_request_partitions allows; the connection closes.
var errTooManyEntries = errors.New("kafkaproto: request names too many entries")

// DefaultMaxRequestPartitions is kafka_max_request_partitions' default,
// the same as OffsetFetch's bound on the partitions of one answer
// (offsetFetchPartitionsMax).
const DefaultMaxRequestPartitions = 10_000

// entryWalker reads a request's arrays from the raw body: flexible
// versions use compact lengths and tagged fields.
type entryWalker struct {
	r    kbin.Reader
	flex bool
	max  int
	// topics and partitions counted so far (announced counts).
	topics, partitions int
}

// overEntries walks a request body (after its header) of key and
// version and reports the first count past max as an errTooManyEntries
// error; nil when within it, when key names no partitions, or when the
// body is malformed (kmsg's decode refuses it then).
func overEntries(key, version int16, body []byte, max int) error {
	if len(body) <= max {
		return nil // every counted entry takes a byte at least: a normal request is not walked
	}
	w := entryWalker{r: kbin.Reader{Src: body}, max: max}
	var over bool
	switch kmsg.Key(key) {
	case kmsg.Fetch:
		over = w.fetch(version)
	case kmsg.ListOffsets:
		over = w.listOffsets(version)
	case kmsg.Produce:
		over = w.produce(version)
	case kmsg.OffsetCommit:
		over = w.offsetCommit(version)
	case kmsg.Metadata:
		over = w.metadata(version)
	default:
		if !w.groupRequest(kmsg.Key(key), version) {
			return nil
		}
		return fmt.Errorf("%w: %s v%d names %d groups, members, protocols, assignments, topics or keys so far, over kafka_max_request_partitions (%d)",
			errTooManyEntries, kmsg.NameForKey(key), version, w.topics, max)
	}
	if !over {
		return nil
	}
	return fmt.Errorf("%w: %s v%d names %d topics and %d partitions so far, over kafka_max_request_partitions (%d)",
		errTooManyEntries, kmsg.NameForKey(key), version, w.topics, w.partitions, max)
}

// groupRequest walks the arrays of the group and admin requests (their
// entries counted in topics): a name on the wire is 1–2 bytes and
// decodes to a 16-byte string, an empty OffsetFetch group 3 bytes to an
// ~80-byte struct, so an 8 MiB frame of them decoded to 128–170 MB.
// Partition ids ([]int32) decode to their own size and are not counted.
// Their own smaller bounds (100 groups, 16 filters) still answer
// INVALID_REQUEST below this one.
func (w *entryWalker) groupRequest(key kmsg.Key, v int16) bool {
	switch key {
	case kmsg.DescribeGroups:
		w.flex = v >= 5
		return w.entryArray(w.string)
	case kmsg.ConsumerGroupDescribe:
		w.flex = true
		return w.entryArray(w.string)
	case kmsg.ListGroups:
		w.flex = v >= 3
		return v >= 4 && w.entryArray(w.string) || v >= 5 && w.entryArray(w.string)
	case kmsg.FindCoordinator:
		w.flex = v >= 3
		if v <= 3 {
			w.string() // key
		}
		if v >= 1 {
			w.skip(1) // key type
		}
		return v >= 4 && w.entryArray(w.string)
	case kmsg.OffsetFetch:
		return w.offsetFetch(v)
	case kmsg.JoinGroup:
		return w.joinGroup(v)
	case kmsg.SyncGroup:
		return w.syncGroup(v)
	case kmsg.LeaveGroup:
		w.flex = v >= 4
		w.string() // group
		return v >= 3 && w.entryArray(func() {
			w.string()         // member id
			w.nullableString() // instance id
			if v >= 5 {
				w.nullableString() // reason
			}
			w.tags()
		})
	case kmsg.ConsumerGroupHeartbeat:
		return w.consumerGroupHeartbeat(v)
	}
	return false
}

// offsetFetch: OffsetFetch v1–v7 (one group) and v8–v9 (groups).
func (w *entryWalker) offsetFetch(v int16) bool {
	w.flex = v >= 6
	topic := func() {
		w.string()
		w.int32Array()
		w.tags()
	}
	if v <= 7 {
		w.string() // group
		return w.entryArray(topic)
	}
	over := false
	return w.entryArray(func() {
		w.string() // group
		if v >= 9 {
			w.nullableString() // member id
			w.skip(4)          // member epoch
		}
		over = over || w.entryArray(topic)
		w.tags()
	}) || over
}

// joinGroup: JoinGroup v0–v9, its protocols.
func (w *entryWalker) joinGroup(v int16) bool {
	w.flex = v >= 6
	w.string() // group
	w.skip(4)  // session timeout
	if v >= 1 {
		w.skip(4) // rebalance timeout
	}
	w.string() // member id
	if v >= 5 {
		w.nullableString() // instance id
	}
	w.string() // protocol type
	return w.entryArray(func() {
		w.string() // name
		w.bytes()  // metadata
		w.tags()
	})
}

// syncGroup: SyncGroup v0–v5, its assignments.
func (w *entryWalker) syncGroup(v int16) bool {
	w.flex = v >= 4
	w.string() // group
	w.skip(4)  // generation
	w.string() // member id
	if v >= 3 {
		w.nullableString() // instance id
	}
	if v >= 5 {
		w.nullableString() // protocol type
		w.nullableString() // protocol
	}
	return w.entryArray(func() {
		w.string() // member id
		w.bytes()  // assignment
		w.tags()
	})
}

// consumerGroupHeartbeat: ConsumerGroupHeartbeat v0–v1, its subscribed
// topic names and owned topics.
func (w *entryWalker) consumerGroupHeartbeat(v int16) bool {
	w.flex = true
	w.string() // group
	w.string() // member id
	w.skip(4)  // member epoch
	w.nullableString()
	w.nullableString() // instance id, rack
	w.skip(4)          // rebalance timeout
	if w.entryArray(w.string) {
		return true
	}
	if v >= 1 {
		w.nullableString() // regex
	}
	w.nullableString() // server assignor
	return w.entryArray(func() {
		w.skip(16) // topic id
		w.int32Array()
		w.tags()
	})
}

// entryArray walks an array of entries with entry, counting them
// against the bound before walking them.
func (w *entryWalker) entryArray(entry func()) bool {
	n := w.arrayLen()
	if w.topics += n; w.topics > w.max {
		return true
	}
	for i := 0; i < n && w.r.Ok(); i++ {
		entry()
	}
	return false
}

// int32Array skips an array of int32s (partition ids).
func (w *entryWalker) int32Array() { w.skip(4 * w.arrayLen()) }

// fetch: Fetch v4–v12, topics and forgotten topics.
func (w *entryWalker) fetch(v int16) bool {
	w.flex = v >= 12
	w.skip(4 + 4 + 4 + 4 + 1) // replica, max wait, min bytes, max bytes, isolation
	if v >= 7 {
		w.skip(4 + 4) // session id and epoch
	}
	part := 4 + 8 + 4 // partition, fetch offset, partition max bytes
	if v >= 9 {
		part += 4 // current leader epoch
	}
	if v >= 12 {
		part += 4 // last fetched epoch
	}
	if v >= 5 {
		part += 8 // log start offset
	}
	if w.topicArray(part, true) {
		return true
	}
	return v >= 7 && w.topicArray(4, false) // forgotten topics: partition ids, untagged
}

// listOffsets: ListOffsets v1–v7.
func (w *entryWalker) listOffsets(v int16) bool {
	w.flex = v >= 6
	w.skip(4) // replica
	if v >= 2 {
		w.skip(1) // isolation
	}
	part := 4 + 8 // partition, timestamp
	if v >= 4 {
		part += 4 // current leader epoch
	}
	return w.topicArray(part, true)
}

// produce: Produce v3–v11; a partition carries its records.
func (w *entryWalker) produce(v int16) bool {
	w.flex = v >= 9
	w.nullableString() // transactional id
	w.skip(2 + 4)      // acks, timeout
	return w.topics1(func() bool {
		w.string()
		return w.partitionArray(func() {
			w.skip(4) // partition
			w.bytes() // records
			w.tags()
		})
	})
}

// offsetCommit: OffsetCommit v2–v9; a partition carries its metadata.
func (w *entryWalker) offsetCommit(v int16) bool {
	w.flex = v >= 8
	w.string() // group
	w.skip(4)  // generation
	w.string() // member id
	if v >= 7 {
		w.nullableString() // instance id
	}
	if v <= 4 {
		w.skip(8) // retention
	}
	part := 4 + 8 // partition, offset
	if v >= 6 {
		part += 4 // leader epoch
	}
	return w.topics1(func() bool {
		w.string()
		return w.partitionArray(func() {
			w.skip(part)
			w.nullableString() // metadata
			w.tags()
		})
	})
}

// metadata: Metadata v1–v12; its topics count against the bound (a
// null array asks for every topic and names none).
func (w *entryWalker) metadata(v int16) bool {
	w.flex = v >= 9
	return w.topics1(func() bool {
		if v >= 10 {
			w.skip(16) // topic id
		}
		w.nullableString()
		w.tags()
		return false
	})
}

// topicArray walks an array of topics, each a name and an array of
// partitions of fixed size part (then, when tagged, tags if flexible).
func (w *entryWalker) topicArray(part int, tagged bool) bool {
	return w.topics1(func() bool {
		w.string()
		return w.partitionArray(func() {
			w.skip(part)
			if tagged {
				w.tags()
			}
		})
	})
}

// topics1 walks an array of topics with topic, then each topic's tags.
func (w *entryWalker) topics1(topic func() bool) bool {
	n := w.arrayLen()
	if w.topics += n; w.topics > w.max {
		return true
	}
	for range n {
		if !w.r.Ok() {
			return false
		}
		if topic() {
			return true
		}
		w.tags()
	}
	return false
}

// partitionArray walks an array of partitions with part.
func (w *entryWalker) partitionArray(part func()) bool {
	n := w.arrayLen()
	if w.partitions += n; w.partitions > w.max {
		return true
	}
	for i := 0; i < n && w.r.Ok(); i++ {
		part()
	}
	return false
}

// arrayLen is an array's announced length (0 for null or past the end).
func (w *entryWalker) arrayLen() int {
	var n int32
	if w.flex {
		n = int32(w.r.Uvarint()) - 1
	} else {
		n = w.r.Int32()
	}
	if !w.r.Ok() || n < 0 {
		return 0
	}
	return int(n)
}

func (w *entryWalker) skip(n int) { w.r.Span(n) }

// string skips a string (nullable or not: a negative length reads as
// none, and kmsg refuses a null where it is not allowed).
func (w *entryWalker) string() { w.nullableString() }

func (w *entryWalker) nullableString() {
	if w.flex {
		w.skip(max(int(w.r.Uvarint())-1, 0))
		return
	}
	w.skip(max(int(w.r.Int16()), 0))
}

// bytes skips nullable bytes.
func (w *entryWalker) bytes() {
	if w.flex {
		w.skip(max(int(w.r.Uvarint())-1, 0))
		return
	}
	w.skip(max(int(w.r.Int32()), 0))
}

// tags skips a flexible version's tagged fields.
func (w *entryWalker) tags() {
	if !w.flex {
		return
	}
	for n := w.r.Uvarint(); n > 0 && w.r.Ok(); n-- {
		w.r.Uvarint()
		w.skip(int(w.r.Uvarint()))
	}
}
