package coordinator

import (
	"encoding/json"
	"sync"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/group"
)

// Shared sync answers. When a revoke fences many partitions, every
// gateway polls from the same seq and the machine hands each the same
// delta — a revoke of a member holding 10,000 partitions, 16 gateways:
// 16 encodings of the same 10,000 fences (~4 ms each, one after another
// on the coordinator's cores) and 16 copies held while they are written
// (BENCHMARKS §3, DESIGN §12's bulk fence). syncShare keeps the last
// large answer's encoding for a short while, keyed by what decides its
// content — the poll's after (a delta's start), the seq it ends at,
// whether it is a reset, and the key ring it carries — and hands the
// same bytes to every poll that gets that answer. An answer's entries
// for a seq range never change once appended; a reset at one seq can
// differ from another by entries pruned since (expired: a gateway prunes
// them too), never by one added, which would have taken a seq.

// syncShareMin is the number of entries from which an answer's encoding
// is kept; syncShareKeep how long.
const (
	syncShareMin  = 256
	syncShareKeep = 2 * time.Second
)

type syncShare struct {
	mu   sync.Mutex
	key  syncShareKey
	body []byte // nil: none kept
	gen  uint64 // bumped per encoding kept: its drop timer's token
}

type syncShareKey struct {
	after, seq uint64
	reset      bool
	keys       *api.JWKS // the ring the answer carries (nil: none)
}

// encode returns the encoding of resp, the answer r to a poll from after
// carrying ring's keys if any, shared with the polls that got the same
// answer within syncShareKeep of its first encoding. Nothing is held
// longer: the kept encoding is dropped when its time is up.
func (s *syncShare) encode(after uint64, r group.SyncReply, resp api.SyncResponse, ring *api.JWKS) ([]byte, error) {
	if len(r.Fences)+len(r.Denied)+len(r.RevokedMembers)+len(r.QoS) < syncShareMin {
		return json.Marshal(resp)
	}
	k := syncShareKey{seq: r.Seq, reset: r.Reset}
	if !r.Reset {
		k.after = after
	}
	if resp.Keys != nil {
		k.keys = ring
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.body != nil && s.key == k {
		return s.body, nil
	}
	b, err := json.Marshal(resp)
	if err != nil {
		return nil, err
	}
	s.gen++
	s.key, s.body = k, b
	gen := s.gen
	time.AfterFunc(syncShareKeep, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.gen == gen {
			s.body = nil
		}
	})
	return b, nil
}
