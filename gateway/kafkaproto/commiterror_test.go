package kafkaproto

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/capgate/capgate/api"
)

// TestCommitRefusedForAFullStateIsMetadataTooLarge: a commit whose
// metadata would take the coordinator's state past state_bytes is
// refused limit_exceeded (coordinator/group admitState); a Kafka client
// reads it as OFFSET_METADATA_TOO_LARGE on that partition, classic and
// KIP-848 alike — before, UNKNOWN_SERVER_ERROR.
func TestCommitRefusedForAFullStateIsMetadataTooLarge(t *testing.T) {
	for _, kip848 := range []bool{false, true} {
		if got := commitError(api.CodeLimitExceeded, kip848); got != kerr.OffsetMetadataTooLarge.Code {
			t.Fatalf("kip848 %v: limit_exceeded answers %v, want OFFSET_METADATA_TOO_LARGE", kip848, kerr.ErrorForCode(got))
		}
	}
}
