package deploy_test

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/config"
	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/gateway"
)

// The manifests' checks: deploy/systemd/*.service and deploy/kubernetes/*.yaml
// are read, and every flag, config key, port, probe path and timeout they
// use is checked against the binary (`capgate <cmd> --help`), the config
// loader (config.Load + Validate, with the environment they set) and the
// API contract (api/openapi.yaml), so they cannot drift from capgate.

// TestSystemdUnitsMatchTheBinary: each unit runs an existing subcommand with
// existing flags, hardened, with TimeoutStopSec above shutdown_timeout and
// LimitNOFILE above the connections the defaults allow.
func TestSystemdUnitsMatchTheBinary(t *testing.T) {
	help := helpFlags(t)
	for _, name := range []string{"capgate-coordinator.service", "capgate-gateway.service"} {
		u, err := parseUnit(filepath.Join("systemd", name))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range checkUnit(name, u, help) {
			t.Errorf("%s: %s", name, p)
		}
	}
}

// TestKubernetesManifestsMatchTheBinary: the workloads' args, environment
// and ConfigMaps load and validate as capgate's config; probes, ports,
// grace periods, secret modes, the coordinator replicas and the gateways'
// coordinator list agree with it.
func TestKubernetesManifestsMatchTheBinary(t *testing.T) {
	help := helpFlags(t)
	objs := readManifests(t)
	for _, p := range checkKubernetes(objs, help) {
		t.Error(p)
	}
}

// TestManifestChecksCatchDrift plants one drift per check in a copy of the
// parsed files and expects each to be reported: the checks can fail.
func TestManifestChecksCatchDrift(t *testing.T) {
	help := helpFlags(t)
	unitDrifts := map[string]func(unit){
		"renamed flag": func(u unit) {
			u["Service.ExecStart"] = "/usr/local/bin/capgate gateway --conf /etc/capgate/capgate.yaml"
		},
		"short stop timeout":  func(u unit) { u["Service.TimeoutStopSec"] = "5s" },
		"few descriptors":     func(u unit) { u["Service.LimitNOFILE"] = "1024" },
		"no NoNewPrivileges":  func(u unit) { delete(u, "Service.NoNewPrivileges") },
		"runs as root":        func(u unit) { u["Service.User"] = "root" },
		"unknown subcommand":  func(u unit) { u["Service.ExecStart"] = "/usr/local/bin/capgate gatewy --config x" },
		"writable filesystem": func(u unit) { u["Service.ProtectSystem"] = "no" },
	}
	for what, drift := range unitDrifts {
		u, err := parseUnit("systemd/capgate-gateway.service")
		if err != nil {
			t.Fatal(err)
		}
		drift(u)
		problems := checkUnit("capgate-gateway.service", u, help)
		if len(problems) == 0 {
			t.Errorf("unit drift %q not caught", what)
		} else {
			t.Logf("unit drift %q: %s", what, problems[0])
		}
	}
	kubeDrifts := map[string]func(objs []*object){
		"readiness path": func(o []*object) {
			workload(o, "Deployment").pod().Containers[0].ReadinessProbe.HTTPGet.Path = "/ready"
		},
		"liveness port": func(o []*object) {
			workload(o, "Deployment").pod().Containers[0].LivenessProbe.HTTPGet.Port = "metrics"
		},
		"container port": func(o []*object) { workload(o, "Deployment").pod().Containers[0].Ports[0].ContainerPort = 9090 },
		"renamed flag":   func(o []*object) { workload(o, "Deployment").pod().Containers[0].Args[1] = "--conf" },
		"config typo":    func(o []*object) { configMap(o, "capgate-gateway-config").edit("sync_timeout:", "sync_timout:") },
		"bad value": func(o []*object) {
			configMap(o, "capgate-gateway-config").edit("sync_timeout: 10s", "sync_timeout: 10")
		},
		"unknown variable": func(o []*object) {
			c := workload(o, "Deployment").pod()
			c.Containers[0].Env[0].Name = "CAPGATE_GATEWAY_IDENT"
		},
		"fixed gateway id": func(o []*object) {
			workload(o, "Deployment").pod().Containers[0].Env[0] = envVar{Name: "CAPGATE_GATEWAY_ID", Value: "gateway-1"}
		},
		"short grace":     func(o []*object) { workload(o, "StatefulSet").pod().TerminationGracePeriodSeconds = 5 },
		"readable secret": func(o []*object) { m := 0o444; secretVolume(workload(o, "StatefulSet")).Secret.DefaultMode = &m },
		"two replicas":    func(o []*object) { workload(o, "StatefulSet").Spec.Replicas = 2 },
		"badger state":    func(o []*object) { configMap(o, "capgate-coordinator-config").edit("state: kafka", "state: badger") },
		"unlisted replica": func(o []*object) {
			configMap(o, "capgate-gateway-config").edit(",http://capgate-coordinator-2", ",http://capgate-coordinator-9")
		},
		"kek not copied": func(o []*object) { workload(o, "StatefulSet").pod().InitContainers = nil },
		"service port":   func(o []*object) { service(o, "capgate-gateway").Spec.Ports[0].TargetPort = "https" },
	}
	for what, drift := range kubeDrifts {
		objs := readManifests(t)
		drift(objs)
		problems := checkKubernetes(objs, help)
		if len(problems) == 0 {
			t.Errorf("kubernetes drift %q not caught", what)
		} else {
			t.Logf("kubernetes drift %q: %s", what, problems[0])
		}
	}
}

// helpFlags runs `capgate coordinator --help` and `capgate gateway --help`
// on a freshly built binary: subcommand → its flags.
func helpFlags(t *testing.T) map[string][]string {
	t.Helper()
	bin := dockerfileBinary(t) // the image's capgate (dockerfile_test.go)
	flag := regexp.MustCompile(`(?m)^\s+(?:-\w, )?(--[a-z0-9-]+)`)
	out := map[string][]string{}
	for _, sub := range []string{"coordinator", "gateway"} {
		text, err := exec.Command(bin, sub, "--help").CombinedOutput()
		if err != nil {
			t.Fatalf("capgate %s --help: %v\n%s", sub, err, text)
		}
		for _, m := range flag.FindAllStringSubmatch(string(text), -1) {
			out[sub] = append(out[sub], m[1])
		}
		if !slices.Contains(out[sub], "--config") {
			t.Fatalf("capgate %s --help lists no --config:\n%s", sub, text)
		}
	}
	return out
}

// checkArgs reports a subcommand or flag the binary does not have, and
// returns the subcommand and the --config path.
func checkArgs(args []string, help map[string][]string) (sub, configPath string, problems []string) {
	if len(args) == 0 || help[args[0]] == nil {
		return "", "", []string{fmt.Sprintf("args %q: no capgate coordinator|gateway subcommand", args)}
	}
	sub, rest := args[0], args[1:]
	for i, a := range rest {
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name, value, hasValue := strings.Cut(a, "=")
		if !slices.Contains(help[sub], name) {
			problems = append(problems, fmt.Sprintf("capgate %s has no flag %s", sub, name))
		}
		if name == "--config" {
			if !hasValue && i+1 < len(rest) {
				value = rest[i+1]
			}
			configPath = value
		}
	}
	if configPath == "" {
		problems = append(problems, fmt.Sprintf("capgate %s runs without --config", sub))
	}
	return sub, configPath, problems
}

// fileConfig is cmd/capgate's file layout (config.example.yaml).
type fileConfig struct {
	Log struct {
		Level  string `yaml:"level"`
		Format string `yaml:"format"`
	} `yaml:"log"`
	Coordinator coordinator.Config `yaml:"coordinator"`
	Gateway     gateway.Config     `yaml:"gateway"`
}

func defaultFileConfig() fileConfig {
	var c fileConfig
	c.Log.Level, c.Log.Format = "info", "json"
	c.Coordinator, c.Gateway = coordinator.DefaultConfig(), gateway.DefaultConfig()
	return c
}

// loadSection loads body (nil: defaults only) with env through the real
// loader and validates sub's section, as `capgate <sub>` does at start.
func loadSection(dir, sub string, body []byte, env []string) (fileConfig, error) {
	cfg := defaultFileConfig()
	p := ""
	if body != nil {
		p = filepath.Join(dir, "capgate.yaml")
		if err := os.WriteFile(p, body, 0o600); err != nil {
			return cfg, err
		}
	}
	if err := config.Load(p, env, &cfg); err != nil {
		return cfg, err
	}
	if sub == "coordinator" {
		return cfg, cfg.Coordinator.Validate()
	}
	return cfg, cfg.Gateway.Validate()
}

// --- systemd ---

// unit is a parsed unit file: "Section.Key" → value (the last one).
type unit map[string]string

func parseUnit(p string) (unit, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	u, section := unit{}, ""
	s := bufio.NewScanner(f)
	for s.Scan() {
		line := strings.TrimSpace(s.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = strings.Trim(line, "[]")
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				return nil, fmt.Errorf("%s: not a unit line: %q", p, line)
			}
			u[section+"."+strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return u, s.Err()
}

func checkUnit(name string, u unit, help map[string][]string) []string {
	fields := strings.Fields(u["Service.ExecStart"])
	if len(fields) < 2 || path.Base(fields[0]) != "capgate" {
		return []string{fmt.Sprintf("ExecStart %q does not run capgate", u["Service.ExecStart"])}
	}
	sub, _, problems := checkArgs(fields[1:], help)
	if sub != "" && name != "capgate-"+sub+".service" {
		problems = append(problems, fmt.Sprintf("runs capgate %s", sub))
	}
	if sub == "" {
		return problems
	}
	cfg, err := loadSection(os.TempDir(), sub, nil, nil)
	if err != nil {
		return append(problems, fmt.Sprintf("defaults: %v", err))
	}
	shutdown, conns := cfg.Gateway.ShutdownTimeout, cfg.Gateway.MaxConnections+cfg.Gateway.KafkaMaxConnections
	if sub == "coordinator" {
		shutdown, conns = cfg.Coordinator.ShutdownTimeout, cfg.Coordinator.MaxConnections
	}
	if stop, err := time.ParseDuration(u["Service.TimeoutStopSec"]); err != nil || stop <= shutdown {
		problems = append(problems, fmt.Sprintf("TimeoutStopSec=%s: want above shutdown_timeout %s", u["Service.TimeoutStopSec"], shutdown))
	}
	if n, err := strconv.Atoi(u["Service.LimitNOFILE"]); err != nil || n < conns+1024 {
		problems = append(problems, fmt.Sprintf("LimitNOFILE=%s: want at least max_connections + 1024 = %d", u["Service.LimitNOFILE"], conns+1024))
	}
	if user := u["Service.User"]; user == "" || user == "root" || user == "0" {
		problems = append(problems, fmt.Sprintf("User=%q: want a user of its own", user))
	}
	want := map[string][]string{"NoNewPrivileges": {"yes", "true"}, "ProtectSystem": {"strict", "full"},
		"PrivateTmp": {"yes", "true"}, "CapabilityBoundingSet": {""}, "KillSignal": {"SIGTERM"}}
	for key, ok := range want {
		if v, set := u["Service."+key]; !set || !slices.Contains(ok, v) {
			problems = append(problems, fmt.Sprintf("%s=%q: want one of %q", key, v, ok))
		}
	}
	return problems
}

// --- Kubernetes ---

type object struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Data map[string]string `yaml:"data"`
	Spec struct {
		Replicas    int    `yaml:"replicas"`
		ServiceName string `yaml:"serviceName"`
		Selector    struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		Template struct {
			Spec podSpec `yaml:"spec"`
		} `yaml:"template"`
		Ports []struct {
			Name       string `yaml:"name"`
			Port       int    `yaml:"port"`
			TargetPort string `yaml:"targetPort"`
		} `yaml:"ports"`
	} `yaml:"spec"`
}

func (o *object) pod() *podSpec { return &o.Spec.Template.Spec }

func (o *object) edit(old, new string) {
	if !strings.Contains(o.Data["capgate.yaml"], old) {
		panic(fmt.Sprintf("%s: no %q to edit", o.Metadata.Name, old))
	}
	o.Data["capgate.yaml"] = strings.Replace(o.Data["capgate.yaml"], old, new, 1)
}

type podSpec struct {
	TerminationGracePeriodSeconds int64 `yaml:"terminationGracePeriodSeconds"`
	SecurityContext               struct {
		RunAsUser  int `yaml:"runAsUser"`
		RunAsGroup int `yaml:"runAsGroup"`
	} `yaml:"securityContext"`
	InitContainers []container `yaml:"initContainers"`
	Containers     []container `yaml:"containers"`
	Volumes        []volume    `yaml:"volumes"`
}

type container struct {
	Name    string   `yaml:"name"`
	Image   string   `yaml:"image"`
	Command []string `yaml:"command"`
	Args    []string `yaml:"args"`
	Env     []envVar `yaml:"env"`
	Ports   []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	ReadinessProbe *probe `yaml:"readinessProbe"`
	LivenessProbe  *probe `yaml:"livenessProbe"`
	VolumeMounts   []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
}

type envVar struct {
	Name      string `yaml:"name"`
	Value     string `yaml:"value"`
	ValueFrom *struct {
		FieldRef *struct {
			FieldPath string `yaml:"fieldPath"`
		} `yaml:"fieldRef"`
		SecretKeyRef *struct {
			Name string `yaml:"name"`
			Key  string `yaml:"key"`
		} `yaml:"secretKeyRef"`
	} `yaml:"valueFrom"`
}

type probe struct {
	HTTPGet *struct {
		Path string `yaml:"path"`
		Port string `yaml:"port"`
	} `yaml:"httpGet"`
}

type volume struct {
	Name      string `yaml:"name"`
	ConfigMap *struct {
		Name        string `yaml:"name"`
		DefaultMode *int   `yaml:"defaultMode"`
	} `yaml:"configMap"`
	Secret *struct {
		SecretName  string `yaml:"secretName"`
		DefaultMode *int   `yaml:"defaultMode"`
	} `yaml:"secret"`
	EmptyDir *struct {
		Medium string `yaml:"medium"`
	} `yaml:"emptyDir"`
}

func readManifests(t *testing.T) []*object {
	t.Helper()
	var objs []*object
	for _, name := range []string{"coordinator.yaml", "gateway.yaml"} {
		b, err := os.ReadFile(filepath.Join("kubernetes", name))
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		for {
			o := &object{}
			if err := dec.Decode(o); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			objs = append(objs, o)
		}
	}
	return objs
}

func find(objs []*object, kind, name string) *object {
	for _, o := range objs {
		if o.Kind == kind && (name == "" || o.Metadata.Name == name) {
			return o
		}
	}
	return nil
}

func workload(objs []*object, kind string) *object  { return find(objs, kind, "") }
func configMap(objs []*object, name string) *object { return find(objs, "ConfigMap", name) }
func service(objs []*object, name string) *object   { return find(objs, "Service", name) }

func secretVolume(o *object) *volume {
	for i, v := range o.pod().Volumes {
		if v.Secret != nil {
			return &o.pod().Volumes[i]
		}
	}
	return nil
}

// placeholderToken stands in for a Secret's token; its hash for a
// Secret's token hashes.
const placeholderToken = "placeholder-sync-token-0123456789abcdef"

// podEnv is the environment capgate sees in pod podName: values with
// $(VAR) expanded as the kubelet does, fieldRefs and secrets filled.
func podEnv(c container, podName string) ([]string, []string) {
	vars, env, problems := map[string]string{}, []string(nil), []string(nil)
	ref := regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
	hash := sha256.Sum256([]byte(placeholderToken))
	for _, e := range c.Env {
		v := ref.ReplaceAllStringFunc(e.Value, func(m string) string { return vars[m[2:len(m)-1]] })
		switch {
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
			v = podName
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && strings.HasSuffix(e.ValueFrom.SecretKeyRef.Key, "hashes"):
			v = hex.EncodeToString(hash[:])
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			v = placeholderToken
		case e.ValueFrom != nil:
			problems = append(problems, fmt.Sprintf("env %s: a source the check does not know", e.Name))
		}
		vars[e.Name] = v
		env = append(env, e.Name+"="+v)
	}
	return env, problems
}

func checkKubernetes(objs []*object, help map[string][]string) []string {
	var problems []string
	coord, gw := workload(objs, "StatefulSet"), workload(objs, "Deployment")
	if coord == nil || gw == nil {
		return []string{"want a coordinator StatefulSet and a gateway Deployment"}
	}
	var advertised []string
	for i := range 3 {
		cfg, p := checkWorkload(objs, coord, fmt.Sprintf("%s-%d", coord.Metadata.Name, i), help)
		problems = append(problems, p...)
		advertised = append(advertised, cfg.Coordinator.Replica.Advertise)
		if i == 0 && cfg.Coordinator.State != coordinator.StateKafka {
			problems = append(problems, fmt.Sprintf("StatefulSet: state %q, want kafka (replicas share its log)", cfg.Coordinator.State))
		}
	}
	if coord.Spec.Replicas != 3 {
		problems = append(problems, fmt.Sprintf("StatefulSet: %d replicas, want 3", coord.Spec.Replicas))
	}
	ids := map[string]bool{}
	for i := range 2 {
		cfg, p := checkWorkload(objs, gw, fmt.Sprintf("%s-5d8f7-%d", gw.Metadata.Name, i), help)
		problems = append(problems, p...)
		ids[cfg.Gateway.ID] = true
		if i == 0 && !slices.Equal(strings.Split(cfg.Gateway.CoordinatorURL, ","), advertised) {
			problems = append(problems, fmt.Sprintf("gateway coordinator_url %q: want every replica's advertise URL %q", cfg.Gateway.CoordinatorURL, advertised))
		}
	}
	if len(ids) != 2 {
		problems = append(problems, fmt.Sprintf("two gateway pods share gateway.id %v: give each its pod name", ids))
	}
	for _, o := range objs {
		if o.Kind == "Service" {
			problems = append(problems, checkService(objs, o)...)
		}
	}
	return problems
}

// checkWorkload loads the config pod podName of o would start with, and
// checks its probes, ports, grace period and secret volumes against it.
func checkWorkload(objs []*object, o *object, podName string, help map[string][]string) (fileConfig, []string) {
	where := o.Kind + " " + o.Metadata.Name
	pod := o.pod()
	if len(pod.Containers) != 1 {
		return fileConfig{}, []string{where + ": want one container"}
	}
	c := pod.Containers[0]
	sub, configPath, problems := checkArgs(c.Args, help)
	if sub == "" {
		return fileConfig{}, prefix(where, problems)
	}
	body, p := mountedConfig(objs, pod, c, configPath)
	problems = append(problems, p...)
	env, p := podEnv(c, podName)
	problems = append(problems, p...)
	dir, err := os.MkdirTemp("", "capgate-manifest-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	cfg, err := loadSection(dir, sub, body, env)
	if err != nil {
		return cfg, prefix(where, append(problems, fmt.Sprintf("capgate %s would not start: %v", sub, err)))
	}
	listen, shutdown := cfg.Gateway.Listen, cfg.Gateway.ShutdownTimeout
	if sub == "coordinator" {
		listen, shutdown = cfg.Coordinator.Listen, cfg.Coordinator.ShutdownTimeout
		problems = append(problems, checkKEK(pod, c, cfg.Coordinator.KafkaState.KEKFile)...)
	}
	problems = append(problems, checkProbes(c, listen)...)
	if grace := time.Duration(pod.TerminationGracePeriodSeconds) * time.Second; grace <= shutdown {
		problems = append(problems, fmt.Sprintf("terminationGracePeriodSeconds %d: want above shutdown_timeout %s", pod.TerminationGracePeriodSeconds, shutdown))
	}
	for _, v := range pod.Volumes {
		if v.Secret != nil && (v.Secret.DefaultMode == nil || *v.Secret.DefaultMode&0o077 != 0) {
			problems = append(problems, fmt.Sprintf("secret volume %s: defaultMode want 0400 or 0600 (capgate refuses keys others can read)", v.Name))
		}
	}
	return cfg, prefix(where, problems)
}

func prefix(where string, problems []string) []string {
	for i := range problems {
		problems[i] = where + ": " + problems[i]
	}
	return problems
}

// mountedConfig is the ConfigMap file the container's --config names.
func mountedConfig(objs []*object, pod *podSpec, c container, configPath string) ([]byte, []string) {
	for _, m := range c.VolumeMounts {
		if m.MountPath != path.Dir(configPath) {
			continue
		}
		for _, v := range pod.Volumes {
			if v.Name == m.Name && v.ConfigMap != nil {
				if cm := configMap(objs, v.ConfigMap.Name); cm != nil && cm.Data[path.Base(configPath)] != "" {
					return []byte(cm.Data[path.Base(configPath)]), nil
				}
			}
		}
	}
	return nil, []string{fmt.Sprintf("--config %s: no ConfigMap mounted holds it", configPath)}
}

// checkProbes: readiness /readyz and liveness /healthz, both routes of the
// API contract, on the port capgate listens on, which listens beyond
// loopback.
func checkProbes(c container, listen string) []string {
	var problems []string
	host, port, err := net.SplitHostPort(listen)
	if err != nil || host == "127.0.0.1" || host == "localhost" || host == "::1" {
		problems = append(problems, fmt.Sprintf("listen %q: the kubelet and Services cannot reach it", listen))
	}
	var contract struct {
		Paths map[string]any `yaml:"paths"`
	}
	if err := yaml.Unmarshal(api.OpenAPIYAML, &contract); err != nil {
		panic(err)
	}
	for _, pr := range []struct {
		what string
		p    *probe
		want string
	}{{"readinessProbe", c.ReadinessProbe, "/readyz"}, {"livenessProbe", c.LivenessProbe, "/healthz"}} {
		if pr.p == nil || pr.p.HTTPGet == nil {
			problems = append(problems, pr.what+": want an httpGet probe")
			continue
		}
		if pr.p.HTTPGet.Path != pr.want || contract.Paths[pr.p.HTTPGet.Path] == nil {
			problems = append(problems, fmt.Sprintf("%s path %q: want %s (api/openapi.yaml)", pr.what, pr.p.HTTPGet.Path, pr.want))
		}
		if got := containerPort(c, pr.p.HTTPGet.Port); strconv.Itoa(got) != port {
			problems = append(problems, fmt.Sprintf("%s port %q is %d; capgate listens on %s", pr.what, pr.p.HTTPGet.Port, got, listen))
		}
	}
	return problems
}

// containerPort resolves a port name or number of c (0: none).
func containerPort(c container, port string) int {
	for _, p := range c.Ports {
		if p.Name == port || strconv.Itoa(p.ContainerPort) == port {
			return p.ContainerPort
		}
	}
	return 0
}

// checkKEK: the KEK file the coordinator reads is copied mode 0600 by an
// init container into a memory volume mounted where the config names it.
func checkKEK(pod *podSpec, c container, kekFile string) []string {
	if kekFile == "" {
		return nil
	}
	mounted := false
	for _, m := range c.VolumeMounts {
		for _, v := range pod.Volumes {
			if v.Name == m.Name && m.MountPath == path.Dir(kekFile) && v.EmptyDir != nil && v.EmptyDir.Medium == "Memory" {
				mounted = true
			}
		}
	}
	for _, ic := range pod.InitContainers {
		cmd := strings.Join(ic.Command, " ")
		if mounted && strings.Contains(cmd, "-m 0600") && strings.HasSuffix(cmd, " "+kekFile) {
			return nil
		}
	}
	return []string{fmt.Sprintf("kek_file %s: want an init container installing it mode 0600 into a memory volume mounted there", kekFile)}
}

// checkService: a Service's targetPort is a port its pods declare.
func checkService(objs []*object, svc *object) []string {
	var problems []string
	for _, o := range objs {
		if (o.Kind != "Deployment" && o.Kind != "StatefulSet") || o.Metadata.Name != svc.Metadata.Name {
			continue
		}
		for _, p := range svc.Spec.Ports {
			if got := containerPort(o.pod().Containers[0], p.TargetPort); got == 0 || got != p.Port {
				problems = append(problems, fmt.Sprintf("Service %s: port %d → targetPort %q, which its pods serve on %d", svc.Metadata.Name, p.Port, p.TargetPort, got))
			}
		}
		return problems
	}
	return []string{fmt.Sprintf("Service %s: no workload of that name", svc.Metadata.Name)}
}
