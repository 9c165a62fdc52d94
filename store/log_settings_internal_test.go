package store

import (
	"maps"
	"testing"
)

// The settings record is a meta value that the generic snapshot builder
// — what a build that predates it runs over every key in Load — decodes
// as an unknown meta name: such a replica still takes over a log a newer
// leader wrote it into (a rolling upgrade). Only this build skips it.
func TestSettingsRecordLoadsInAnOlderBuild(t *testing.T) {
	settings := map[string]string{SettingIssuer: "capgate", SettingCluster: "prod"}
	value := encodeSettings(settings)
	b := newSnapshotBuilder()
	if err := b.addRecord([]byte(keyLogSettings), value); err != nil {
		t.Fatalf("the generic builder refuses the record: %v", err)
	}
	if _, ok := b.finish().Meta[MetaLogSettings]; !ok {
		t.Fatal("not an ordinary meta value")
	}
	back, err := decodeSettings(value)
	if err != nil || !maps.Equal(back, settings) {
		t.Fatalf("round trip: %v %v", back, err)
	}
	if err := (&Writer{}).PutMeta(MetaLogSettings, nil); err == nil {
		t.Fatal("PutMeta writes the log's settings")
	}
}

// diffSettings names only settings both sides hold, in name order.
func TestDiffSettings(t *testing.T) {
	log := map[string]string{"a": "1", "b": "2", "c": "3"}
	ours := map[string]string{"c": "x", "a": "y", "b": "2", "d": "4"}
	got := diffSettings(log, ours)
	want := []SettingDiff{{Name: "a", Log: "1", Ours: "y"}, {Name: "c", Log: "3", Ours: "x"}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("diffSettings = %+v, want %+v", got, want)
	}
}
