package store_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/capgate/capgate/store"
)

// A replica that could not serve the log — another KEK, another issuer —
// finds out from what it read (Follower.Check), and its Promote fails
// with ErrIncompatible having written NOTHING: the leader it would have
// replaced keeps writing (not fenced) and the log holds no barrier of
// its (redteam2 K: the candidate fenced and committed a barrier before
// it checked the KEK, and the other followers read each barrier as a
// live leader).
func TestIncompatibleFollowerPromotesNothing(t *testing.T) {
	kek := func(b byte) *store.KEK {
		k, err := store.NewKEK(bytes.Repeat([]byte{b}, 32))
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	leaderOpts := store.LogOptions{WriterID: "leader", KEK: kek(1), Settings: map[string]string{store.SettingIssuer: "capgate"}}
	for _, tc := range []struct {
		name string
		opts store.LogOptions
		want []string // the error names both values
		kek  bool     // errors.Is ErrKEK
	}{
		{"another KEK", store.LogOptions{WriterID: "bad", KEK: kek(2), Settings: leaderOpts.Settings},
			[]string{`kek: the log's "` + kek(1).ID() + `", ours "` + kek(2).ID() + `"`}, true},
		{"another issuer", store.LogOptions{WriterID: "bad", KEK: kek(1), Settings: map[string]string{store.SettingIssuer: "capgate-typo"}},
			[]string{`issuer: the log's "capgate", ours "capgate-typo"`}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEachLog(t, func(t *testing.T, env logEnv) {
				leader, err := env.open(leaderOpts)
				if err != nil {
					t.Fatal(err)
				}
				closeAtCleanup(t, leader)
				mustUpdate(t, leader, func(w *store.Writer) error { return w.PutKeyRing([]byte(`{"ring":1}`)) })
				good := env.mustFollow(t, store.LogOptions{WriterID: "good", KEK: leaderOpts.KEK, Settings: leaderOpts.Settings})
				bad := env.mustFollow(t, tc.opts)
				at, _ := leader.Position()
				waitApplied(t, good, at.Offset)
				waitApplied(t, bad, at.Offset)
				if err := good.Check(); err != nil {
					t.Fatalf("a follower with the leader's settings: %v", err)
				}
				err = bad.Check()
				if !errors.Is(err, store.ErrIncompatible) || errors.Is(err, store.ErrKEK) != tc.kek {
					t.Fatalf("Check: %v, want ErrIncompatible (ErrKEK %t)", err, tc.kek)
				}
				for _, w := range tc.want {
					if !strings.Contains(err.Error(), w) {
						t.Fatalf("Check: %q does not name %q", err, w)
					}
				}
				before, _ := good.Position()
				if _, err := bad.Promote(context.Background()); !errors.Is(err, store.ErrIncompatible) {
					t.Fatalf("Promote: %v, want ErrIncompatible", err)
				}
				if err := leader.Beat("http://leader"); err != nil {
					t.Fatalf("the leader after the refused promotion: %v (fenced?)", err)
				}
				at, _ = leader.Position()
				waitApplied(t, good, at.Offset)
				after, _ := good.Position()
				if after.Commits != before.Commits+1 || after.Barriers != before.Barriers || after.Writer != "leader" {
					t.Fatalf("the log after the refused promotion: %+v, before %+v: want only the leader's beat", after, before)
				}
			})
		})
	}
}

// The first leader records its shared settings (the caller's, the KEK's
// id, the transactional id); a follower that restores them from a
// snapshot checks against them too; a log that lacks one of a new
// leader's settings gets it added; a writer whose settings differ is
// refused by the single-writer open as well, unless it adopts the log
// (AdoptSettings), after which the old settings are the mismatch.
func TestLeaderRecordsItsSettings(t *testing.T) {
	forEachLog(t, func(t *testing.T, env logEnv) {
		first, err := env.open(store.LogOptions{WriterID: "a", Settings: map[string]string{store.SettingCluster: "prod"}})
		if err != nil {
			t.Fatal(err)
		}
		putEpochs(t, first, 0, 3, 1)
		if err := first.WriteSnapshot(context.Background()); err != nil {
			t.Fatal(err)
		}
		first.Close()
		// A leader that also names its issuer: the log now records both.
		second, err := env.open(store.LogOptions{WriterID: "b", Settings: map[string]string{store.SettingCluster: "prod", store.SettingIssuer: "capgate"}})
		if err != nil {
			t.Fatal(err)
		}
		closeAtCleanup(t, second)
		if err := second.WriteSnapshot(context.Background()); err != nil {
			t.Fatal(err)
		}
		// Restored from that snapshot alone (no commit after it).
		f := env.mustFollow(t, store.LogOptions{WriterID: "c", Settings: map[string]string{store.SettingIssuer: "other"}})
		if err := f.Check(); !errors.Is(err, store.ErrIncompatible) || !strings.Contains(err.Error(), `issuer: the log's "capgate", ours "other"`) {
			t.Fatalf("Check after a snapshot: %v", err)
		}
		if err := env.mustFollow(t, store.LogOptions{WriterID: "d"}).Check(); err != nil {
			t.Fatalf("a follower naming no settings of its own: %v", err)
		}
		second.Close()
		if st, err := env.open(store.LogOptions{WriterID: "e", Settings: map[string]string{store.SettingCluster: "staging"}}); !errors.Is(err, store.ErrIncompatible) {
			if st != nil {
				st.Close()
			}
			t.Fatalf("open under another cluster: %v, want ErrIncompatible", err)
		}
		// A deliberate change: adopted, recorded; the old settings are
		// now the mismatch.
		adopted, err := env.open(store.LogOptions{WriterID: "e", AdoptSettings: true, Settings: map[string]string{store.SettingCluster: "staging"}})
		if err != nil {
			t.Fatalf("adopt another cluster: %v", err)
		}
		adopted.Close()
		old := env.mustFollow(t, store.LogOptions{WriterID: "g", Settings: map[string]string{store.SettingCluster: "prod"}})
		if _, err := old.Promote(context.Background()); !errors.Is(err, store.ErrIncompatible) ||
			!strings.Contains(err.Error(), `cluster: the log's "staging", ours "prod"`) {
			t.Fatalf("promote with the old cluster after the change: %v", err)
		}
		// Load never shows the record.
		third := env.mustOpen(t, "f")
		if snap := mustLoad(t, third); len(snap.Meta) != 0 {
			t.Fatalf("Load shows %v", snap.Meta)
		}
	})
}
