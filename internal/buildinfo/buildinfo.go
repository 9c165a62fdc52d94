// Package buildinfo says which capgate this is: the version, the commit
// and the Go release it was built from, read once from what the Go
// toolchain stamps into every binary (runtime/debug.ReadBuildInfo: the
// module version, vcs.revision and vcs.modified). `capgate version` prints
// it and both processes export it as the capgate_build_info metric.
// A release build sets the version at link time:
//
//	go build -ldflags "-X github.com/capgate/capgate/internal/buildinfo.version=v1.2.3" ./cmd/capgate
//
// and a build with no git checkout to read (the Dockerfile's: the image's
// context leaves .git out) the commit, with
// -X github.com/capgate/capgate/internal/buildinfo.commit=<hash>.
//
// Safe for concurrent use.
package buildinfo

import (
	"cmp"
	"runtime/debug"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Info is one build's identity. Fields the toolchain did not stamp (go
// test binaries, builds outside a git checkout) are "unknown".
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	GoVersion string `json:"go_version"`
}

const unknown = "unknown"

// version, when set with -ldflags -X, is the version over the module's.
var version string

// commit, when set with -ldflags -X, is the commit over vcs.revision
// (docker build --build-arg COMMIT=$(git rev-parse HEAD)).
var commit string

// Read returns this binary's Info.
var Read = sync.OnceValue(func() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return Info{Version: cmp.Or(version, unknown), Commit: cmp.Or(commit, unknown), GoVersion: unknown}
	}
	return fromBuildInfo(bi)
})

func fromBuildInfo(bi *debug.BuildInfo) Info {
	info := Info{Version: bi.Main.Version, Commit: unknown, GoVersion: bi.GoVersion}
	if version != "" {
		info.Version = version
	}
	if info.Version == "" || info.Version == "(devel)" {
		info.Version = unknown
	}
	modified := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Commit = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if modified && info.Commit != unknown {
		info.Commit += "-dirty"
	}
	if commit != "" {
		info.Commit = commit
	}
	return info
}

// Collector is the capgate_build_info gauge: always 1, labelled with
// version, commit and goversion, for a registry of its own.
func Collector() prometheus.Collector {
	info := Read()
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "capgate_build_info", Help: "1, labelled with the version, commit and Go release of this build.",
		ConstLabels: prometheus.Labels{"version": info.Version, "commit": info.Commit, "goversion": info.GoVersion},
	}, func() float64 { return 1 })
}
