package coordinator

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/capgate/capgate/coordinator/group"
	"github.com/capgate/capgate/store"
)

// TestPublicLoopErrorNamesNoTenant: what /readyz and a replica's
// step-down reason say of a loop failed closed. A failed audit, or a
// write the store refused as a regression (the store names the
// partition: "save epoch g/orders/0"), says only which; errors.Is still
// sees the cause (a replica tells a fenced write by it). Another error —
// Kafka unreachable — is said whole, as operators read it there.
func TestPublicLoopErrorNamesNoTenant(t *testing.T) {
	for _, c := range []struct {
		err      error
		sentinel error
		want     string
	}{
		{fmt.Errorf("coordinator: refused a Ready: %w: %w", group.ErrUnsafe, errors.New("group: invariant: grant of secret-group/orders/0 at epoch 2")), group.ErrUnsafe, "safety audit failed"},
		{fmt.Errorf("store: save epoch secret-group/orders/0: %w: stored 3, new 2", store.ErrEpochRegression), store.ErrEpochRegression, "store refused a write"},
		{fmt.Errorf("store: save offset secret-group/orders/0: %w: stored 9, new 4", store.ErrOffsetRegression), store.ErrOffsetRegression, "store refused a write"},
		{fmt.Errorf("store: key g/secret-group: %w: bad", store.ErrCorrupt), store.ErrCorrupt, "store refused a write"},
	} {
		got := publicLoopError(c.err)
		if strings.Contains(got.Error(), "secret-group") || !strings.Contains(got.Error(), c.want) || !errors.Is(got, c.sentinel) {
			t.Errorf("publicLoopError(%q) = %q (errors.Is %v): want %q, no group named, the cause still wrapped", c.err, got, errors.Is(got, c.sentinel), c.want)
		}
	}
	// Any other failed write (a disk full) named its record: the group and
	// member id were on /readyz for anyone (redteam18 #3; a store Writer's
	// error is a store.RecordError, hidden whole since review24).
	full := fmt.Errorf("coordinator: persist: %w", &store.RecordError{Op: "save member", Record: "secret-group/member-1", Err: io.ErrShortWrite})
	if got := publicLoopError(full); strings.Contains(got.Error(), "secret-group") || strings.Contains(got.Error(), "member-1") || !errors.Is(got, io.ErrShortWrite) {
		t.Errorf("publicLoopError(%q) = %q: want no record named, the cause still wrapped", full, got)
	}
	kafka := fmt.Errorf("store: kafka: produce: %w", store.ErrFenced)
	if got := publicLoopError(kafka); got.Error() != kafka.Error() || !errors.Is(got, store.ErrFenced) {
		t.Errorf("publicLoopError(%q) = %q, want it whole", kafka, got)
	}
}
