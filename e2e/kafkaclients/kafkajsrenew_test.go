package kafkaclients

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/capgate/capgate/e2e/sdk"
)

// envDuration reads a duration from the environment (measurement runs).
func envDuration(name string, def time.Duration) time.Duration {
	if v, err := time.ParseDuration(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

// TestKafkaJSRenewsCapgateCredentials: an unmodified KafkaJS consumer
// whose capgate client credentials live 10 s reads through the Kafka
// listener across four renewals. Its token provider reads the current
// credential from a file a renewer rewrites with a new one (same name,
// another jti) at half its life; KafkaJS re-authenticates each connection
// (KIP-368) shortly before its SASL session ends (reauthenticationThreshold
// 3 s here). A capgate member is bound to its credential's jti, so the
// listener renews it as a new capgate member at each re-authentication
// (release at the client's committed offsets, leave, join). As with
// Kafka, the client must see nothing of it: no rebalance, every record
// once. Before, the release took the partitions out of the client's
// assignment at once — its commits in the window were refused
// ILLEGAL_GENERATION, its heartbeat answered REBALANCE_IN_PROGRESS, and it
// read again from the released offset: 1–2 records a renewal twice (7 of
// ~1,000 in this test; 5 and 8 of ~3,000 over 75 s with 30 s credentials
// and KafkaJS's default threshold), one rebalance a renewal. Now: none
// read twice, none lost, no rebalance.
//
// KJS_LIFETIME, KJS_THRESHOLD and KJS_RUN (durations) change the
// credential lifetime, KafkaJS's threshold and how long it reads, for
// measurements (KJS_LIFETIME=30s KJS_THRESHOLD=10s KJS_RUN=75s: the
// reported case).
func TestKafkaJSRenewsCapgateCredentials(t *testing.T) {
	logs, observed := observer.New(zap.InfoLevel)
	s := Start(t, Options{Partitions: 2, Observe: logs})
	r := kafkajsRenewal{lifetime: envDuration("KJS_LIFETIME", 10*time.Second), threshold: envDuration("KJS_THRESHOLD", 3*time.Second),
		run: envDuration("KJS_RUN", 22*time.Second), group: "kjs-renew", observed: observed,
		renewals: func() int { return len(memberRenewals(observed)) }}
	r.mint = func(ctx context.Context) (string, error) {
		return s.Stack.ClientCredential(ctx, "kjs", []string{"kjs-*"}, []string{s.Topic}, r.lifetime)
	}
	out := r.read(t, s)
	if out.renewals < 2 {
		t.Errorf("%d member renewals, want at least 2: the test did not cross them", out.renewals)
	}
	// Every renewal was a rebalance before; then one now and then under
	// load (the renewal's own revoke held for the client:
	// TestKafkaJSRenewedManyTimes). Now none.
	if out.joinsAfterRenewal > 0 {
		t.Errorf("KafkaJS joined its group %d times after the first of %d renewals: a renewal reached the client", out.joinsAfterRenewal, out.renewals)
	}
}

// TestKafkaJSRenewedManyTimes: the same KafkaJS consumer renewed every
// ~2 s (credentials of 4 s, re-authentication 1.5 s before the SASL
// session ends) for 40 s: ~20 member renewals, and KafkaJS must not
// rejoin its group at any of them (no GROUP_JOIN after the first
// renewal), read nothing twice and lose nothing. Before, now and then
// (3 in 40 renewals, 1 in 48 in TestKafkaJSRenewsCapgateCredentials) the
// client was told to rebalance: the renewal's release of a partition
// made the coordinator queue the revoke of it to the old member itself
// (giveUp, startMove), and the listener held that revoke for the client
// (the partition was in its assignment), which took the partition out
// of what the client should own while the renewal ran — a heartbeat in
// that window answered REBALANCE_IN_PROGRESS.
//
// KJS_MANY_RUN (a duration) changes how long it reads, KJS_MEMBERS how
// many KafkaJS consumers read in the group (1), for measurements.
func TestKafkaJSRenewedManyTimes(t *testing.T) {
	members, _ := strconv.Atoi(os.Getenv("KJS_MEMBERS"))
	renewedManyTimes(t, 2, members, envDuration("KJS_MANY_RUN", 40*time.Second), "kjs-renew-many")
}

// TestKafkaJSGroupRenewedManyTimes: three KafkaJS consumers of one group
// (four partitions) share a credential renewed every ~2 s (4 s
// credentials) for 30 s: each member is renewed ~15 times, and no
// member may rejoin the group once all hold their share, read anything
// twice or lose anything. Before, a renewal renewed the member anew —
// released its partitions, left and joined as a new capgate member — and
// the leave let the coordinator hand its partitions to the other members
// and back when the new one joined: each renewal was a rebalance of the
// whole group (2 members: 20–28 GROUP_JOINs and 25–28 records read twice
// in 40 s). Now the listener presents the old credential beside the new
// one (renew_credential) and the coordinator renews the member in place.
func TestKafkaJSGroupRenewedManyTimes(t *testing.T) {
	renewedManyTimes(t, 4, 3, envDuration("KJS_MANY_RUN", 30*time.Second), "kjs-renew-group")
}

// renewedManyTimes runs members KafkaJS consumers of group over a topic
// of partitions for run with 4 s credentials renewed at half life, and
// fails on a renewal short of one per 4 s, on any GROUP_JOIN after the
// first renewal (after the members settled), on a record read twice or
// lost.
func renewedManyTimes(t *testing.T, partitions int32, members int, run time.Duration, group string) {
	logs, observed := observer.New(zap.InfoLevel)
	s := Start(t, Options{Partitions: partitions, Observe: logs})
	r := kafkajsRenewal{lifetime: 4 * time.Second, threshold: 1500 * time.Millisecond, run: run, group: group, observed: observed, members: members,
		renewals: func() int { return len(memberRenewals(observed)) }}
	r.mint = func(ctx context.Context) (string, error) {
		return s.Stack.ClientCredential(ctx, "kjs", []string{"kjs-*"}, []string{s.Topic}, r.lifetime)
	}
	out := r.read(t, s)
	if want := int(run / (4 * time.Second)); out.renewals < want {
		t.Errorf("%d member renewals, want at least %d: the test did not cross them", out.renewals, want)
	}
	if out.joinsAfterRenewal > 0 {
		t.Errorf("KafkaJS joined the group %d times after the first of %d renewals (members settled): a renewal rebalanced the group", out.joinsAfterRenewal, out.renewals)
	}
}

// kafkajsRenewal is a KafkaJS consumer (consumer.js) of group reading for
// run through the listener with credentials of lifetime from mint,
// renewed at half life through its TOKEN_FILE, re-authenticating
// threshold before its SASL session ends; renewals counts what the
// listener did at each (observed: its log).
type kafkajsRenewal struct {
	lifetime, threshold, run time.Duration
	group                    string
	members                  int // KafkaJS consumers in the group (default 1)
	mint                     func(context.Context) (string, error)
	observed                 *observer.ObservedLogs
	renewals                 func() int
}

// memberRenewals are the listener's log lines of its members' renewals:
// as a new capgate member (a coordinator that does not take
// renew_credential, or a member bound to another credential than the one
// presented) or in place.
func memberRenewals(observed *observer.ObservedLogs) []observer.LoggedEntry {
	return observed.Filter(func(e observer.LoggedEntry) bool {
		return strings.Contains(e.Message, "renewing it as a new capgate member") ||
			strings.Contains(e.Message, "renewed in place with a new credential of the same name")
	}).All()
}

// renewalRead is what a kafkajsRenewal read: its figures are logged.
// joinsAfterRenewal counts KafkaJS's GROUP_JOIN events after the
// listener's first renewal of its member: each one a rebalance the
// client saw while being renewed (its first join comes before).
type renewalRead struct {
	records, duplicates, lost         int
	renewals, rebalances, assignments int
	joinsAfterRenewal                 int
}

// read runs the consumer and a producer (a record per partition every
// 50 ms straight to Kafka) for r.run, then waits until every record was
// read. Each record read twice, each record lost and a KafkaJS crash fail
// the test.
func (r kafkajsRenewal) read(t *testing.T, s *Stack) renewalRead {
	t.Helper()
	tokenFile := filepath.Join(t.TempDir(), "token")
	var minted atomic.Int32
	mint := func(ctx context.Context) error {
		c, err := r.mint(ctx)
		if err != nil {
			return err
		}
		tmp := tokenFile + ".tmp"
		if err := os.WriteFile(tmp, []byte(c), 0o600); err != nil {
			return err
		}
		minted.Add(1)
		return os.Rename(tmp, tokenFile) // whole: the provider never reads half a token
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := mint(ctx); err != nil {
		t.Fatal(err)
	}
	renewer := make(chan struct{})
	go func() {
		defer close(renewer)
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(r.lifetime / 2):
			}
			if err := mint(ctx); err != nil && ctx.Err() == nil {
				t.Errorf("renew the credential: %v", err)
				return
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-renewer })
	var prod *producer
	if r.members <= 1 {
		prod = startProducer(t, s, 50*time.Millisecond)
	}
	procs := map[string]*consumerProc{}
	all := func() (out []event) { // every member's
		for _, js := range procs {
			out = append(out, js.Events()...)
		}
		return out
	}
	for i := range max(r.members, 1) {
		name := fmt.Sprintf("kjs%d", i+1)
		cmd := exec.Command("node", "consumer.js")
		cmd.Dir = kafkajsDir(t)
		cmd.Env = append(os.Environ(), "BROKERS="+strings.Join(s.KafkaAddrs(), ","), "TOKEN_FILE="+tokenFile,
			"GROUP="+r.group, "TOPIC="+s.Topic, "CLIENT_ID="+name, "REAUTH_THRESHOLD_MS="+strconv.FormatInt(r.threshold.Milliseconds(), 10))
		procs[name] = runProc(t, cmd)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, e := range r.observed.FilterLoggerName("gateway-1.kafka").All() {
			t.Logf("gateway %s %s %v", e.Time.Format("15:04:05.000"), e.Message, e.ContextMap())
		}
		for name, js := range procs {
			last := map[int32]int64{}
			for _, e := range js.Events() {
				switch {
				case e.Ev == "record":
					last[e.Partition] = e.Offset
				case e.Ev != "commit" && e.Ev != "token":
					t.Logf("%s %s %s %v", name, e.time().Format("15:04:05.000"), e.Ev, e.Partitions)
				}
			}
			t.Logf("%s: last offsets read %v", name, last)
		}
	})
	var settledAt time.Time
	if len(procs) > 1 {
		// Several members: their first joins rebalance the group; GROUP_JOINs
		// count from when every member holds its share (fewer members than
		// partitions: each holds some).
		sdk.Eventually(t, 60*time.Second, "the group's members settled", func() (bool, string) {
			held := map[int32]string{}
			for name, js := range procs {
				if len(lastAssigned(js)) == 0 {
					return false, name + " holds nothing yet"
				}
				for _, p := range lastAssigned(js) {
					if other, ok := held[p]; ok {
						return false, fmt.Sprintf("partition %d assigned to %s and %s", p, other, name)
					}
					held[p] = name
				}
			}
			return len(held) == int(s.Partitions), fmt.Sprintf("assigned %v of %d", held, s.Partitions)
		})
		settledAt = time.Now()
		// Records from now on: an eager member's first joins may read a
		// record again before its first commit, which is no renewal's.
		prod = startProducer(t, s, 50*time.Millisecond)
	}
	sdk.Eventually(t, 30*time.Second, "KafkaJS reads", func() (bool, string) {
		n := countPolled(polled(procs))
		return n > 0, fmt.Sprintf("%d read", n)
	})
	start := time.Now()
	sdk.Eventually(t, r.run+r.lifetime, "reading across renewals", func() (bool, string) {
		return time.Since(start) >= r.run, fmt.Sprintf("%d renewals", r.renewals())
	})
	prod.Stop()
	want := prod.produced()
	allRead(t, 30*time.Second, procs, want)
	got := polled(procs)
	var out renewalRead
	for p, n := range want {
		out.records += int(n)
		for o := range n {
			switch by := got[p][o]; {
			case len(by) == 0:
				out.lost++
			case len(by) > 1:
				out.duplicates += len(by) - 1
				t.Errorf("partition %d offset %d read %d times", p, o, len(by))
			}
		}
	}
	tokens := 0
	var firstRenewal time.Time
	if rs := memberRenewals(r.observed); len(rs) > 0 {
		firstRenewal = rs[0].Time
	}
	if firstRenewal.Before(settledAt) {
		firstRenewal = settledAt // the members' own first joins came before
	}
	for _, e := range all() {
		switch e.Ev {
		case "rebalancing":
			out.rebalances++
		case "assigned":
			out.assignments++
			if !firstRenewal.IsZero() && e.time().After(firstRenewal) {
				out.joinsAfterRenewal++
			}
		case "token":
			tokens++
		case "crash":
			t.Errorf("KafkaJS crashed: %s", e.Err)
		}
	}
	out.renewals = r.renewals()
	t.Logf("credentials of %v, KafkaJS threshold %v, %v of reading: %d records, %d duplicates, %d lost; %d credentials, %d tokens presented, %d member renewals, %d KafkaJS rebalances, %d assignments (%d after the first renewal)",
		r.lifetime, r.threshold, time.Since(start).Round(time.Second), out.records, out.duplicates, out.lost, minted.Load(), tokens, out.renewals, out.rebalances, out.assignments, out.joinsAfterRenewal)
	if out.lost > 0 {
		t.Errorf("%d records lost", out.lost)
	}
	return out
}
