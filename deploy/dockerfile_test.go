package deploy_test

import (
	"debug/elf"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/capgate/capgate/internal/stack"
)

// The Dockerfile's checks. No container engine runs in CI, so the image
// is not built; what can drift is checked against what it must agree
// with: the builder's Go version against go.mod, its go build command —
// run here as written — for a static binary (a plain go build links libc
// dynamically where a C compiler is found, and that binary fails to start
// in the distroless base: "no such file or directory"), and the image's
// entrypoint, user and ports against deploy/kubernetes, which run
// `image: capgate:latest` with args only.

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct{ op, args string }

func readDockerfile(t *testing.T) []instruction {
	t.Helper()
	b, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var out []instruction
	var cur string
	for _, line := range strings.Split(string(b), "\n") {
		trimmed := strings.TrimSpace(line)
		if cur == "" && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if strings.HasSuffix(trimmed, "\\") {
			cur += strings.TrimSuffix(trimmed, "\\") + " "
			continue
		}
		cur += trimmed
		op, args, _ := strings.Cut(cur, " ")
		out = append(out, instruction{strings.ToUpper(op), strings.TrimSpace(args)})
		cur = ""
	}
	return out
}

// dockerfileProblems reports what in the instructions disagrees with
// go.mod's Go version and the Kubernetes workloads' images, users and ports.
func dockerfileProblems(ins []instruction, goVersion string, objs []*object) []string {
	var problems []string
	var stages []string
	final := map[string]string{}
	expose := []int{}
	for _, in := range ins {
		switch in.op {
		case "FROM":
			stages = append(stages, in.args)
			clear(final)
		case "ENTRYPOINT", "USER", "WORKDIR":
			final[in.op] = in.args
		case "EXPOSE":
			for _, p := range strings.Fields(in.args) {
				n, _ := strconv.Atoi(p)
				expose = append(expose, n)
			}
		}
	}
	if len(stages) < 2 || !strings.HasPrefix(stages[0], "golang:"+goVersion+" ") {
		problems = append(problems, fmt.Sprintf("the build stage %q: want golang:%s (go.mod's go line)", stages, goVersion))
	}
	if final["ENTRYPOINT"] != `["/usr/local/bin/capgate"]` {
		problems = append(problems, fmt.Sprintf("ENTRYPOINT %s: want [\"/usr/local/bin/capgate\"] (the manifests pass args only)", final["ENTRYPOINT"]))
	}
	for _, o := range objs {
		for _, c := range o.pod().Containers {
			if !strings.HasPrefix(c.Image, "capgate:") {
				continue
			}
			if len(c.Command) > 0 {
				problems = append(problems, fmt.Sprintf("%s: container %s sets command %q: the image's entrypoint is capgate", o.Metadata.Name, c.Name, c.Command))
			}
			sc := o.pod().SecurityContext
			if want := fmt.Sprintf("%d:%d", sc.RunAsUser, sc.RunAsGroup); final["USER"] != want {
				problems = append(problems, fmt.Sprintf("USER %s: %s runs as %s", final["USER"], o.Metadata.Name, want))
			}
			for _, p := range c.Ports {
				if !slices.Contains(expose, p.ContainerPort) {
					problems = append(problems, fmt.Sprintf("EXPOSE %v lacks %s's port %d (%s)", expose, o.Metadata.Name, p.ContainerPort, p.Name))
				}
			}
		}
	}
	return problems
}

// dockerfile is the binary the Dockerfile's build command makes, built
// once per test binary: the manifests' checks run it too (helpFlags), so
// the package compiles capgate once.
var dockerfile struct {
	once sync.Once
	dir  string
	bin  string
	err  error
}

func dockerfileBinary(t *testing.T) string {
	t.Helper()
	ins := readDockerfile(t)
	dockerfile.once.Do(func() {
		dockerfile.dir, dockerfile.err = os.MkdirTemp("", "capgate-dockerfile-")
		if dockerfile.err != nil {
			return
		}
		root, err := stack.ModuleRoot()
		if err != nil {
			dockerfile.err = err
			return
		}
		cmd := exec.Command("sh", "-c", buildCommand(t, ins, dockerfile.dir, "v0.0.0-dockerfile", "c0ffee-dockerfile"))
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			dockerfile.err = fmt.Errorf("the Dockerfile's build: %w\n%s", err, out)
		}
		dockerfile.bin = filepath.Join(dockerfile.dir, "capgate")
	})
	if dockerfile.err != nil {
		t.Fatal(dockerfile.err)
	}
	return dockerfile.bin
}

// buildCommand is the RUN that builds ./cmd/capgate, with /out in dir
// and VERSION and COMMIT set.
func buildCommand(t *testing.T, ins []instruction, dir, version, commit string) string {
	t.Helper()
	for _, in := range ins {
		if in.op == "RUN" && strings.Contains(in.args, "go build") && strings.Contains(in.args, "./cmd/capgate") {
			return strings.NewReplacer("/out/", dir+"/", "${VERSION}", version, "${COMMIT}", commit).Replace(in.args)
		}
	}
	t.Fatal("the Dockerfile has no RUN building ./cmd/capgate")
	return ""
}

// TestDockerfileMatchesTheRepository: the Dockerfile's Go version, user,
// entrypoint and ports agree with go.mod and the manifests, and its go
// build command, run as written, makes a static capgate that runs and
// carries the --build-arg VERSION and COMMIT (the image's build has no
// .git to read the commit from: .dockerignore).
func TestDockerfileMatchesTheRepository(t *testing.T) {
	ins := readDockerfile(t)
	mod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	goVersion := regexp.MustCompile(`(?m)^go (\S+)$`).FindStringSubmatch(string(mod))[1]
	for _, p := range dockerfileProblems(ins, goVersion, readManifests(t)) {
		t.Error(p)
	}

	bin := dockerfileBinary(t)
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the Dockerfile's build makes a dynamically linked capgate: it would not start in the distroless base (set CGO_ENABLED=0)")
		}
	}
	out, err := exec.Command(bin, "version", "-o", "json").Output()
	var v struct {
		Version string `json:"version"`
		Commit  string `json:"commit"`
	}
	if err != nil || json.Unmarshal(out, &v) != nil || v.Version != "v0.0.0-dockerfile" || v.Commit != "c0ffee-dockerfile" {
		t.Errorf("capgate version of the Dockerfile's build: %v %s, want version v0.0.0-dockerfile, commit c0ffee-dockerfile", err, out)
	}
}

// TestDockerfileChecksCatchDrift plants one drift per check: they can fail.
func TestDockerfileChecksCatchDrift(t *testing.T) {
	ins := readDockerfile(t)
	objs := readManifests(t)
	if p := dockerfileProblems(ins, "1.26.8", objs); len(p) != 0 && !strings.Contains(strings.Join(p, "\n"), "build stage") {
		t.Fatalf("the Dockerfile has problems before any drift: %q", p)
	}
	edit := func(op, args string) []instruction {
		out := slices.Clone(ins)
		for i := range out {
			if out[i].op == op {
				out[i].args = args
			}
		}
		return out
	}
	for name, c := range map[string]struct {
		ins       []instruction
		goVersion string
	}{
		"another Go":         {ins, "9.99.0"},
		"a shell entrypoint": {edit("ENTRYPOINT", `["/bin/sh"]`), ""},
		"root":               {edit("USER", "0:0"), ""},
		"no HTTP ports":      {edit("EXPOSE", "9093 9094 9095 9096"), ""},
	} {
		goVersion := c.goVersion
		if goVersion == "" {
			goVersion = strings.TrimPrefix(strings.Fields(ins[0].args)[0], "golang:")
		}
		if len(dockerfileProblems(c.ins, goVersion, objs)) == 0 {
			t.Errorf("%s: not reported", name)
		}
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	if dockerfile.dir != "" {
		os.RemoveAll(dockerfile.dir)
	}
	os.Exit(code)
}
