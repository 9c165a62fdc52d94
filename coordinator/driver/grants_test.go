package driver_test

import (
	"errors"
	"testing"
	"time"

	"github.com/capgate/capgate/coordinator/driver"
	"github.com/capgate/capgate/coordinator/group"
	"github.com/capgate/capgate/ocap"
)

// fixedMinter mints "token-<partition>" expiring at the ttl's end.
type fixedMinter struct{}

func (fixedMinter) Mint(_ ocap.Kind, c ocap.Claims, now time.Time, ttl time.Duration) (string, *ocap.Claims, error) {
	c.ID = "jti"
	c.ExpiresAt = ocap.Seconds(now.Add(ttl).Unix())
	return "token", &c, nil
}

// logEnd resolves earliest to 10 and latest to 50, or fails.
type logEnd struct{ fail bool }

func (r logEnd) Resolve(grants []group.Grant) error {
	if r.fail {
		return errors.New("kafka unreachable")
	}
	for i := range grants {
		switch grants[i].Offset {
		case group.OffsetEarliest:
			grants[i].Offset = 10
		case group.OffsetLatest:
			grants[i].Offset = 50
		}
	}
	return nil
}

// TestGrantNamesTheResetPolicy: a grant whose partition has nothing
// committed says which offset_reset policy chose its start offset —
// resolved or not, renewal or grant — and a committed one says nothing,
// so the Kafka listener can answer OffsetFetch -1 (the client's own
// reset policy) only where nothing was committed.
func TestGrantNamesTheResetPolicy(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	grants := func() []group.Grant {
		return []group.Grant{
			{Group: "g", Holder: "m", Topic: "t", Partition: 0, Epoch: 1, Offset: 7, ExpiresAt: now.Add(time.Minute)},
			{Group: "g", Holder: "m", Topic: "t", Partition: 1, Epoch: 1, Offset: group.OffsetEarliest, ExpiresAt: now.Add(time.Minute)},
			{Group: "g", Holder: "m", Topic: "t", Partition: 2, Epoch: 1, Offset: group.OffsetLatest, ExpiresAt: now.Add(time.Minute)},
			{Group: "g", Holder: "m", Topic: "t", Partition: 3, Epoch: 1, Offset: 0, ExpiresAt: now.Add(time.Minute)},
		}
	}
	for _, tc := range []struct {
		name    string
		resolve bool
		r       logEnd
		offsets []int64
	}{
		{"resolved", true, logEnd{}, []int64{7, 10, 50, 0}},
		{"lookup failed", true, logEnd{fail: true}, []int64{7, -2, -1, 0}},
		{"renewals", false, logEnd{}, []int64{7, -2, -1, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := driver.RenderGrants(grants(), tc.resolve, now, time.Time{}, fixedMinter{}, tc.r)
			if err != nil {
				t.Fatal(err)
			}
			want := []string{"", "earliest", "latest", ""}
			for i, g := range out.Grants {
				if g.Offset != tc.offsets[i] || g.OffsetReset != want[i] {
					t.Errorf("grant of partition %d: offset %d offset_reset %q, want %d %q", g.Partition, g.Offset, g.OffsetReset, tc.offsets[i], want[i])
				}
			}
		})
	}
	all, err := driver.RenderGrants(grants()[:1], true, now, time.Time{}, fixedMinter{}, logEnd{})
	if err != nil || all.Grants[0].OffsetReset != "" {
		t.Fatalf("committed grant alone: %+v %v", all.Grants, err)
	}
}
