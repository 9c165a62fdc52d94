package stack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"gopkg.in/yaml.v3"
)

// Launch describes one serving process of a capgate binary: `Bin
// Section --config Dir/Name.yaml`, the file holding the log settings and
// the Section ("coordinator" or "gateway") as Settings. It is how every
// part process is started, whether a stack's (Coordinator, Gateway) or a
// benchmark's deployment of an earlier binary (whose Settings are a map
// of the keys every version knows, as an old binary refuses unknown
// ones).
type Launch struct {
	Name     string // process name; the config file is Dir/Name.yaml
	Bin      string
	Dir      string
	Section  string // "coordinator" or "gateway"
	Settings any    // the section: a config struct or a map
	// LogLevel of the process's JSON log (default info).
	LogLevel string
	// Env is added to CleanEnv (secrets a config file holds redacted).
	Env []string
	// OnLine receives every stdout and stderr line (nil: none).
	OnLine func([]byte)
}

// Start writes the config file (0600) and starts the process. The caller
// stops it (Terminate, Kill).
func (l Launch) Start() (*Process, error) {
	level := l.LogLevel
	if level == "" {
		level = "info"
	}
	b, err := yaml.Marshal(map[string]any{"log": map[string]string{"level": level, "format": "json"}, l.Section: l.Settings})
	if err != nil {
		return nil, fmt.Errorf("stack: config of %s: %w", l.Name, err)
	}
	path := filepath.Join(l.Dir, l.Name+".yaml")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return nil, fmt.Errorf("stack: config of %s: %w", l.Name, err)
	}
	return StartProcess(l.Name, l.Bin, []string{l.Section, "--config", path}, CleanEnv(l.Env...), l.OnLine, l.OnLine)
}

// WaitHTTP waits until url answers 200 (a part's /healthz or /readyz),
// failing as soon as the process exits, with its last lines.
func (p *Process) WaitHTTP(ctx context.Context, hc *http.Client, url string) error {
	return WaitOK(ctx, hc, url, p.Done(), func() error {
		return fmt.Errorf("%s exited: %v\n%s", p.Name, p.Wait(0), p.Tail())
	})
}

// WaitOK polls url (GET, every 20 ms) until it answers 200. It fails when
// ctx ends, after 20 s (generous: never an assertion about speed), or as
// soon as gone is closed (the part stopped; nil: never), with gone's
// reason. Each GET is bounded by the wait's context, so a part that
// hangs (SIGSTOP) cannot hold it past its end, and ends when gone closes:
// the address of a part that exited may be another's listener that never
// answers (one that took the port first).
func WaitOK(ctx context.Context, hc *http.Client, url string, gone <-chan struct{}, reason func() error) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	getCtx, cancelGET := context.WithCancel(ctx)
	defer cancelGET()
	if gone != nil {
		go func() {
			select {
			case <-gone:
				cancelGET()
			case <-getCtx.Done():
			}
		}()
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		status, err := getStatus(getCtx, hc, url)
		if err == nil && status == http.StatusOK {
			return nil
		}
		select {
		case <-gone:
			return fmt.Errorf("stack: waiting for %s: %w", url, reason())
		default:
		}
		select {
		case <-gone:
			return fmt.Errorf("stack: waiting for %s: %w", url, reason())
		case <-ctx.Done():
			return fmt.Errorf("stack: waiting for %s: %w (last: status %d, %v)", url, ctx.Err(), status, err)
		case <-tick.C:
		}
	}
}

// getStatus is the status of GET url, its body read and dropped.
func getStatus(ctx context.Context, hc *http.Client, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, nil
}

// FreeAddr turns a listen address with port 0 (or "") into a free
// loopback port now, for a process told its address in a config file
// that cannot report a port-0 pick of its own (e2e/bench's earlier
// binaries). The port is free when it returns (listened on, then
// closed): another process can take it before the caller binds it, so
// the caller retries a start that failed "address already in use". A
// stack's own parts hold theirs until they start (ports.go).
func FreeAddr(addr string) (string, error) {
	addr, ln, err := reserve(addr)
	if ln != nil {
		ln.Close()
	}
	return addr, err
}

// FreePortRanges finds n non-overlapping ranges of width consecutive
// free ports on host ("" is 127.0.0.1) and returns the first address of
// each: a gateway's Kafka listener binds kafka_fetch_lanes ports from
// its kafka_listen port on. They are free when it returns (listened on,
// then closed); another process could take one before the caller binds
// it, so the caller retries a start that failed "address already in
// use" (e2e/bench's deploy), or holds them with ReservePortRanges.
func FreePortRanges(host string, n, width int) ([]string, error) {
	r, err := ReservePortRanges(host, n, width)
	if err != nil {
		return nil, err
	}
	r.Close()
	return r.Addrs, nil
}

// PortRanges are ranges of consecutive ports on loopback, each held
// (listened on) until Release, so that no other process takes one: a
// peered gateway's Kafka listener (kafka_peers names every gateway's
// before the first starts) releases its range just before it binds it.
// Safe for concurrent use.
type PortRanges struct {
	Addrs []string // the first address of each range

	mu   sync.Mutex
	held [][]net.Listener
}

// ReservePortRanges finds n non-overlapping ranges of width consecutive
// free ports on host ("" is 127.0.0.1) and holds them.
//
// The ranges are sought below the kernel's ephemeral ports first: there
// only explicit binds take ports. In the ephemeral range the kernel
// gives port 0 an odd port and outgoing connections even ones (Linux),
// so a range from a port-0 listener needs the even ports after it free,
// and a machine busy with loopback connections — one consumer polling
// 2,000 partitions of one gateway is 2,000 of them — failed
// TestPeersSpreadPartitions "no 4 consecutive free ports in 100 tries".
func ReservePortRanges(host string, n, width int) (*PortRanges, error) {
	if host == "" {
		host = "127.0.0.1"
	}
	r := &PortRanges{}
	low, high := belowEphemeral(width)
	for attempt := 0; attempt < 100 && len(r.Addrs) < n && high > low; attempt++ {
		base := low + rand.IntN(high-low)
		group := make([]net.Listener, 0, width)
		for j := range width {
			l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(base+j)))
			if err != nil {
				break
			}
			group = append(group, l)
		}
		if len(group) < width {
			for _, l := range group {
				l.Close()
			}
			continue
		}
		r.Addrs, r.held = append(r.Addrs, group[0].Addr().String()), append(r.held, group)
	}
	var tried []net.Listener // ranges too short, kept until the end: no later range overlaps them
	defer func() {
		for _, l := range tried {
			l.Close()
		}
	}()
	for attempt := 0; len(r.Addrs) < n; attempt++ {
		if attempt == 100 {
			r.Close()
			return nil, fmt.Errorf("stack: no %d consecutive free ports on %s in 100 tries", width, host)
		}
		first, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			r.Close()
			return nil, fmt.Errorf("stack: free port: %w", err)
		}
		group := []net.Listener{first}
		base := first.Addr().(*net.TCPAddr).Port
		for j := 1; j < width; j++ {
			l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(base+j)))
			if err != nil {
				break
			}
			group = append(group, l)
		}
		if len(group) < width {
			tried = append(tried, group...)
			continue
		}
		r.Addrs, r.held = append(r.Addrs, first.Addr().String()), append(r.held, group)
	}
	return r, nil
}

// belowEphemeral is where ReservePortRanges seeks ranges of width ports
// first: bases in [low, high), below the first ephemeral port (Linux's
// ip_local_port_range; 32768 when it cannot be read) and above 10000.
func belowEphemeral(width int) (low, high int) {
	first := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil {
				first = v
			}
		}
	}
	return 10000, first - width
}

// Release closes range i's listeners, for its user to bind them at once.
func (r *PortRanges) Release(i int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range r.held[i] {
		l.Close()
	}
	r.held[i] = nil
}

// Close releases every range.
func (r *PortRanges) Close() {
	for i := range r.Addrs {
		r.Release(i)
	}
}

// StartKafkaProcess runs a Kafka program that prints one JSON line
// {"addrs":["host:port",…]} on stdout once it listens (e2e/bench's
// benchkafka: kfake with several brokers in a process of its own), and
// returns it with the brokers' addresses. onLine receives its other
// lines.
func StartKafkaProcess(ctx context.Context, name, bin string, args []string, onLine func([]byte)) (*Process, []string, error) {
	addrs := make(chan []string, 1)
	p, err := StartProcess(name, bin, args, CleanEnv(), func(line []byte) {
		var m struct{ Addrs []string }
		if json.Unmarshal(line, &m) == nil && len(m.Addrs) > 0 {
			select {
			case addrs <- m.Addrs:
			default:
			}
			return
		}
		if onLine != nil {
			onLine(line)
		}
	}, onLine)
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	select {
	case a := <-addrs:
		return p, a, nil
	case <-p.Done():
		return nil, nil, fmt.Errorf("stack: %s exited before listening: %v\n%s", name, p.Wait(0), p.Tail())
	case <-ctx.Done():
		p.Kill()
		return nil, nil, errors.Join(fmt.Errorf("stack: %s not listening: %w", name, ctx.Err()), errors.New(p.Tail()))
	}
}
