package store_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/capgate/capgate/store"
)

// A leader's beat reaches followers as Position.Leader, never as state;
// a beat of a deposed leader fails fenced, and so does its next Update.
func TestBeatsNameTheLeaderAndAreFenced(t *testing.T) {
	forEachLog(t, func(t *testing.T, env logEnv) {
		old := env.mustOpen(t, "a")
		putEpochs(t, old, 0, 2, 1)
		f := env.mustFollow(t, store.LogOptions{WriterID: "b"})
		before := mustLoad(t, old)
		if err := old.Beat("http://a:7070"); err != nil {
			t.Fatal(err)
		}
		at, _ := old.Position()
		waitApplied(t, f, at.Offset)
		pos, _ := f.Position()
		if pos.Writer != "a" || pos.Leader.ID != "a" || pos.Leader.URL != "http://a:7070" || pos.Leader.AtMs == 0 {
			t.Fatalf("follower position %+v, want a's beat", pos)
		}
		got, err := f.Load()
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, before) {
			t.Fatalf("a beat changed the state:\n %+v\nwant\n %+v", got, before)
		}

		taker := env.mustOpen(t, "b")
		if err := old.Beat("http://a:7070"); !errors.Is(err, store.ErrFenced) {
			t.Fatalf("deposed beat: %v, want ErrFenced", err)
		}
		if err := old.Update(func(w *store.Writer) error { return w.PutEpoch("g", "t", 0, 5) }); !errors.Is(err, store.ErrFenced) {
			t.Fatalf("update after a fenced beat: %v, want ErrFenced", err)
		}
		if err := taker.Beat("http://b:7070"); err != nil {
			t.Fatal(err)
		}
		if pos, _ := taker.Position(); pos.Leader.URL != "http://b:7070" {
			t.Fatalf("writer position %+v, want its own beat", pos)
		}
	})
}
