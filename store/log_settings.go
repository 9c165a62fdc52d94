package store

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Shared settings: what every writer of one log must agree on, or a
// takeover breaks the service instead of saving it — a replica whose KEK
// cannot open the key ring cannot sign; one with another issuer or
// cluster mints tokens nobody accepts; one with another transactional id
// does not even fence the others. The leader records its settings in the
// log (meta MetaLogSettings, kept in snapshots and by compaction, never
// in a Load), and a follower checks the log it reads against its own
// (Follower.Check) — before it counts as a standby, and again before
// Promote writes anything.
//
// keyLogSettings is where the log keeps them: meta MetaLogSettings.
var keyLogSettings = string(stringsKey(prefixMeta, MetaLogSettings))

// The store adds two settings of its own to LogOptions.Settings: "kek"
// (the KEK's id, a fingerprint, never key material) and
// "transactional_id" (the writer identity the log fences on). A name only
// one side knows is no mismatch (a log written before a setting was
// recorded); the next leader adds it.

// ErrIncompatible: this writer cannot take the log over, whatever the
// timing — its settings differ from the ones the log was written under
// (a *SettingsError), its KEK does not open the key ring in the log, or
// the log has a key layout this build does not read. Not transient: a
// replica that meets it stops trying until it is reconfigured.
var ErrIncompatible = errors.New("cannot take this log over")

// SettingDiff is one shared setting the log and this writer disagree on.
type SettingDiff struct {
	Name string
	Log  string // the value the log was written under
	Ours string // this writer's
}

// SettingsError names every shared setting that differs between the log
// and this writer (by name; both values are safe to show).
type SettingsError struct {
	Log   string // topic (or in-memory log name) and shard
	Diffs []SettingDiff
}

func (e *SettingsError) Error() string {
	parts := make([]string, len(e.Diffs))
	for i, d := range e.Diffs {
		parts[i] = fmt.Sprintf("%s: the log's %q, ours %q", d.Name, d.Log, d.Ours)
	}
	return "store: " + e.Log + ": " + ErrIncompatible.Error() + ": settings differ from the ones it was written under: " +
		strings.Join(parts, "; ")
}

// Is makes errors.Is(err, ErrIncompatible) true, and errors.Is(err,
// ErrKEK) when the KEK's id is among the differences.
func (e *SettingsError) Is(target error) bool {
	if target == ErrKEK {
		return slices.ContainsFunc(e.Diffs, func(d SettingDiff) bool { return d.Name == SettingKEK })
	}
	return target == ErrIncompatible
}

// Setting names: the two the store adds to LogOptions.Settings, and the
// coordinator's (KafkaConfig.Options sets SettingCluster; a replica adds
// SettingIssuer).
const (
	SettingKEK             = "kek"
	SettingTransactionalID = "transactional_id"
	SettingCluster         = "cluster"
	SettingIssuer          = "issuer"
)

// maxSettings bounds the record (and the settings a caller may pass).
const maxSettings = 32

// diffSettings lists the names both sides hold with different values, in
// name order (PURE).
func diffSettings(log, ours map[string]string) []SettingDiff {
	var diffs []SettingDiff
	for _, name := range slices.Sorted(maps.Keys(ours)) {
		if theirs, ok := log[name]; ok && theirs != ours[name] {
			diffs = append(diffs, SettingDiff{Name: name, Log: theirs, Ours: ours[name]})
		}
	}
	return diffs
}

// encodeSettings is the meta value: bytes (as every meta value, so any
// build decodes it) holding the settings.
func encodeSettings(settings map[string]string) []byte {
	e := newEncoder(64 * len(settings))
	e.uint(uint64(len(settings)))
	for _, name := range slices.Sorted(maps.Keys(settings)) {
		e.string(name)
		e.string(settings[name])
	}
	return encodeBytes(e.b)
}

func decodeSettings(value []byte) (map[string]string, error) {
	inner, err := decodeBytes(value)
	if err != nil {
		return nil, err
	}
	d := newDecoder(inner)
	n := d.uint()
	if d.err == nil && n > maxSettings {
		return nil, fmt.Errorf("%d settings, at most %d", n, maxSettings)
	}
	settings := make(map[string]string, n)
	for range n {
		name := d.string()
		settings[name] = d.string()
	}
	if err := d.finish(); err != nil {
		return nil, err
	}
	return settings, nil
}

// settings are this writer's shared settings: the caller's, the KEK's id
// and the transactional id.
func settingsOf(t logTransport, opts LogOptions) map[string]string {
	s := maps.Clone(opts.Settings)
	if s == nil {
		s = map[string]string{}
	}
	if opts.KEK != nil {
		s[SettingKEK] = opts.KEK.ID()
	}
	s[SettingTransactionalID] = t.transactionalID()
	return s
}

// compatible checks the state read so far against ours: the settings
// the log records, the key layout, and that our KEK opens the key ring.
// It reads only what is there: a log that holds none of them yet passes.
func (s *logState) compatible(name string, ours map[string]string, adopt bool) error {
	if value, found := s.get([]byte(keyLogSettings)); found {
		theirs, err := decodeSettings(value)
		if err != nil {
			return fmt.Errorf("store: %s: %w", name, corrupt([]byte(keyLogSettings), err))
		}
		if diffs := diffSettings(theirs, ours); len(diffs) > 0 && !adopt {
			return &SettingsError{Log: name, Diffs: diffs}
		}
	}
	if value, found := s.get([]byte(prefixLayout)); found {
		if err := checkLayoutValue(value); err != nil {
			return fmt.Errorf("store: %s: %w: %w", name, ErrIncompatible, err)
		}
	}
	if ring, found := s.get([]byte(prefixKeyRing)); found {
		if _, err := s.unseal([]byte(prefixKeyRing), ring); err != nil {
			return fmt.Errorf("store: %s: %w: %w", name, ErrIncompatible, err)
		}
	}
	return nil
}

// settingsUpdate is the settings record a new leader writes: the log's
// with ours added, or nil when the log already records all of ours.
// Called only once compatible passed: ours replace the log's (they differ
// only under AdoptSettings).
func (s *logState) settingsUpdate(ours map[string]string) ([]byte, error) {
	theirs := map[string]string{}
	if value, found := s.get([]byte(keyLogSettings)); found {
		var err error
		if theirs, err = decodeSettings(value); err != nil {
			return nil, corrupt([]byte(keyLogSettings), err)
		}
	}
	merged := maps.Clone(theirs)
	maps.Copy(merged, ours)
	if maps.Equal(merged, theirs) {
		return nil, nil
	}
	if len(merged) > maxSettings {
		// Names no build writes any more pile up only this far: keep ours.
		merged = ours
	}
	return encodeSettings(merged), nil
}

// Check reports whether this follower could take its log over, as far
// as it has read: nil, or an error wrapping ErrIncompatible naming what
// differs (settings by name with both values, the KEK ids). A replica
// that gets one must not count as a standby nor Promote.
func (f *Follower) Check() error {
	if f.isClosed() {
		return fmt.Errorf("store: check: %w", ErrClosed)
	}
	return f.state.compatible(f.t.name(), settingsOf(f.t, f.opts), f.opts.AdoptSettings)
}

// AwaitEnd waits until the follower applied every transaction the log
// had committed when it was called — a commit record at or past the
// log's end then, or the last one right before it (on Kafka its commit
// marker is the last offset) — so Check then covers the whole log; ctx
// bounds the wait. A log whose tail is an aborted transaction is caught
// up with only at the next commit (a live leader beats).
func (f *Follower) AwaitEnd(ctx context.Context) error {
	if f.manual {
		return f.CatchUp()
	}
	end, err := f.t.endCommit(ctx)
	if err != nil {
		return err
	}
	for {
		pos, changed := f.Position()
		if pos.Offset >= end {
			return nil
		}
		select {
		case <-changed:
		case <-f.done:
			if f.err != nil {
				return f.err
			}
			return fmt.Errorf("store: %s: await the end: %w", f.t.name(), ErrClosed)
		case <-ctx.Done():
			return fmt.Errorf("store: %s: await the end (offset %d, read to %d): %w", f.t.name(), end, pos.Offset, ctx.Err())
		}
	}
}
