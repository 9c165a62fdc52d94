package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	for _, tc := range []struct {
		bi   debug.BuildInfo
		want Info
	}{
		{debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.3"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "false"}}},
			Info{Version: "v1.2.3", Commit: "abc123", GoVersion: "go1.26.8"}},
		{debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "true"}}},
			Info{Version: "unknown", Commit: "abc123-dirty", GoVersion: "go1.26.8"}},
		{debug.BuildInfo{GoVersion: "go1.26.8"}, Info{Version: "unknown", Commit: "unknown", GoVersion: "go1.26.8"}},
	} {
		if got := fromBuildInfo(&tc.bi); got != tc.want {
			t.Errorf("%+v: got %+v, want %+v", tc.bi, got, tc.want)
		}
	}
}

// TestCommitFromLdflags: a commit set at link time (the Dockerfile's
// COMMIT: its build has no .git) is the commit, over vcs.revision.
func TestCommitFromLdflags(t *testing.T) {
	defer func(was string) { commit = was }(commit)
	commit = "c0ffee"
	bi := debug.BuildInfo{GoVersion: "go1.26.8", Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "true"}}}
	if got := fromBuildInfo(&bi); got.Commit != "c0ffee" {
		t.Errorf("commit set with -X c0ffee: got %+v", got)
	}
	if got := fromBuildInfo(&debug.BuildInfo{GoVersion: "go1.26.8"}); got.Commit != "c0ffee" {
		t.Errorf("commit set with -X c0ffee, nothing stamped: got %+v", got)
	}
}
