package coordinator

import (
	"fmt"
	"hash/fnv"
	"net/url"
	"reflect"
	"time"

	"github.com/capgate/capgate/coordinator/leader"
	"github.com/capgate/capgate/ocap"
)

// ReplicaConfig is the coordinator's replica section (state: kafka):
// several `capgate coordinator` processes share one config, each with its
// own replica.id, listen and replica.advertise; one leads the shard, the
// others follow its log and answer 421 not_leader naming it.
type ReplicaConfig struct {
	// ID names this replica in the log and in hints ("" = the
	// coordinator id, fine for one replica; give each replica its own).
	// The coordinator id stays the issuer every replica signs as.
	ID string `yaml:"id"`
	// Advertise is the base URL clients reach this replica at, named in
	// not_leader answers while it leads ("" = http(s)://listen).
	Advertise string `yaml:"advertise"`
	// Peers are the advertised URLs of the replicas, this one's among
	// them or not (the list clients are given): a console page left open
	// at this replica offers the others when it stops answering — a
	// standby sends the browser on to the leader. Only this list is ever
	// linked, never a URL from a request. Optional, at most maxPeers.
	Peers []string `yaml:"peers"`
	// BeatInterval is how often the leader writes a beat to the log;
	// LeaseTimeout how long a follower waits without seeing a commit
	// before it takes over (fence, read to the end, serve). Timing decides
	// only when: the log's fencing decides whether.
	BeatInterval time.Duration `yaml:"beat_interval"`
	LeaseTimeout time.Duration `yaml:"lease_timeout"`
	// LeaseTimeoutMax is how far a slow state log stretches
	// lease_timeout (0, or not above it: never): a follower waits twice
	// the longest of the last 8 intervals between two of the leader's
	// commits it saw, a leader whose lease lapsed keeps renewing for
	// twice the longest of the same intervals between its own writes
	// (beats and persists), a follower whose last commit is a
	// candidate's takeover barrier waits at least half of this — each at
	// least lease_timeout, at most this (leader.Config.LeaseTimeoutMax).
	// On a starved machine a beat's transaction took 1.4-2 s and a takeover 2-3.5 s: with the
	// lease fixed at 1 s, leaders stepped down while their beats were
	// committing and candidates fenced one another, and the shard had
	// no leader for many seconds. A dead leader is taken over after this
	// long at most while the log is that slow; after lease_timeout
	// whenever its commits came quickly.
	LeaseTimeoutMax time.Duration `yaml:"lease_timeout_max"`
	// AdoptLogSettings lets this replica follow and take over a log
	// written under another coordinator id or cluster (or transactional
	// id prefix), recording its own: a deliberate change of those, with
	// every other replica stopped (they are unfit afterwards until they
	// get the new settings). Without it such a replica is unfit: it never
	// takes over and /readyz says why. A KEK that does not open the key
	// ring is refused either way.
	AdoptLogSettings bool `yaml:"adopt_log_settings"`
}

// maxPeers bounds replica.peers: a shard has a handful of replicas.
const maxPeers = 16

// staggerSlots × an eighth of the lease bounds a replica's extra wait
// (5/8 of it); two replicas share a slot one time in six.
const staggerSlots = 6

// DefaultReplicaConfig returns the documented defaults.
func DefaultReplicaConfig() ReplicaConfig {
	return ReplicaConfig{BeatInterval: 200 * time.Millisecond, LeaseTimeout: time.Second, LeaseTimeoutMax: 4 * time.Second}
}

// isDefault reports whether r is the defaults (an empty peers list is
// none: YAML writes a nil one as []).
func (r ReplicaConfig) isDefault() bool {
	peers := r.Peers
	r.Peers = nil
	return len(peers) == 0 && reflect.DeepEqual(r, DefaultReplicaConfig())
}

// Validate reports the first bad setting.
func (r ReplicaConfig) Validate() error {
	if r.ID != "" && !ocap.ValidName(r.ID) {
		return fmt.Errorf("replica.id: must be 1-255 printable characters without '/', not . or .., got %q", r.ID)
	}
	if r.Advertise != "" {
		u, err := url.Parse(r.Advertise)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("replica.advertise: must be an http(s) URL, got %q", r.Advertise)
		}
	}
	if len(r.Peers) > maxPeers {
		return fmt.Errorf("replica.peers: at most %d URLs, got %d", maxPeers, len(r.Peers))
	}
	seen := make(map[string]bool, len(r.Peers))
	for _, p := range r.Peers {
		u, err := url.Parse(p)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return fmt.Errorf("replica.peers: each must be a replica's base URL (http(s)://host:port), got %q", p)
		}
		if seen[u.Scheme+"://"+u.Host] {
			return fmt.Errorf("replica.peers: %q is listed twice", p)
		}
		seen[u.Scheme+"://"+u.Host] = true
	}
	switch {
	case r.BeatInterval < 10*time.Millisecond || r.BeatInterval > time.Minute:
		return fmt.Errorf("replica.beat_interval: must be within [10ms, 1m], got %s", r.BeatInterval)
	case r.LeaseTimeout < 2*r.BeatInterval || r.LeaseTimeout > 10*time.Minute:
		return fmt.Errorf("replica.lease_timeout: must be within [2 × beat_interval, 10m], got %s", r.LeaseTimeout)
	case r.LeaseTimeoutMax < 0 || r.LeaseTimeoutMax > 10*time.Minute:
		return fmt.Errorf("replica.lease_timeout_max: must be within [0, 10m] (0: lease_timeout, never stretched), got %s", r.LeaseTimeoutMax)
	}
	return nil
}

// replicaID is this replica's name in the log.
func (c Config) replicaID() string {
	if c.Replica.ID != "" {
		return c.Replica.ID
	}
	return c.ID
}

// advertise is the URL not_leader answers name for this replica.
func (c Config) advertise() string {
	if c.Replica.Advertise != "" {
		return c.Replica.Advertise
	}
	if c.TLS.Enabled() {
		return "https://" + c.Listen
	}
	return "http://" + c.Listen
}

// otherPeers is replica.peers without this replica's own advertised
// URL, as origins (scheme://host[:port]): what its console links to.
func (c Config) otherPeers() []string {
	self := ""
	if u, err := url.Parse(c.advertise()); err == nil {
		self = u.Scheme + "://" + u.Host
	}
	var out []string
	for _, p := range c.Replica.Peers {
		u, err := url.Parse(p)
		if err != nil || u.Scheme+"://"+u.Host == self {
			continue
		}
		out = append(out, u.Scheme+"://"+u.Host)
	}
	return out
}

// electorConfig is the replica's leadership decision settings. The
// stagger, one of staggerSlots slots of an eighth of the lease each,
// picked by the replica id, spreads replicas that notice the same silence: the first
// one's barrier reaches the others (who then follow it) before their turn
// comes. Two in one slot are safe too — the later fences the earlier.
func (c Config) electorConfig() leader.Config {
	h := fnv.New64a()
	h.Write([]byte(c.replicaID()))
	stagger := time.Duration(h.Sum64()%staggerSlots) * (c.Replica.LeaseTimeout / 8)
	return leader.Config{
		ID: c.replicaID(), BeatInterval: c.Replica.BeatInterval,
		LeaseTimeout: c.Replica.LeaseTimeout, LeaseTimeoutMax: c.Replica.LeaseTimeoutMax, Stagger: stagger,
	}
}
