package group_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/assign"
	"github.com/capgate/capgate/coordinator/group"
)

var update = flag.Bool("update", false, "rewrite testdata transcripts with the actual output")

// TestTranscripts runs testdata/*.txt: blocks of one command, a "----"
// line and the expected output (every message the command caused, member
// ids shown as instance names), separated by blank lines. Every step also
// runs CheckInvariants and the safety check. go test -update rewrites the
// expected output.
//
// Commands: topics T=N..., poll GW, join I TOPIC,...|pattern=RE,
// heartbeat I, commit I T/P=OFFSET [release], release I, leave I,
// tick DURATION, revoke T/P, lease T/P HOLDER TTL, revoke-member I,
// restart DURATION, state, gateways.
func TestTranscripts(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.txt")
	if len(files) == 0 {
		t.Fatal("no transcripts in testdata")
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			runTranscript(t, file)
		})
	}
}

type transcript struct {
	*world
	names map[string]string // member id -> instance
	ids   map[string]string // instance -> member id
	joins map[group.Ref]string
}

func runTranscript(t *testing.T, file string) {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	tr := &transcript{world: newWorld(t), names: map[string]string{}, ids: map[string]string{}, joins: map[group.Ref]string{}}
	var blocks []string
	for _, block := range strings.Split(strings.TrimSpace(string(data)), "\n\n") {
		text, want, _ := strings.Cut(block, "\n----")
		want = strings.TrimPrefix(want, "\n")
		var command string
		for _, line := range strings.Split(text, "\n") {
			if !strings.HasPrefix(line, "#") {
				command = strings.TrimSpace(line)
			}
		}
		got := tr.run(command)
		blocks = append(blocks, strings.TrimSuffix(text+"\n----\n"+got, "\n"))
		if !*update && got != want {
			t.Errorf("%s: %s\ngot:\n%s\nwant:\n%s", file, command, got, want)
		}
	}
	if *update {
		if err := os.WriteFile(file, []byte(strings.Join(blocks, "\n\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// run executes one command and renders what it caused.
func (tr *transcript) run(command string) string {
	args := strings.Fields(command)
	tr.what[tr.ref+1] = command
	from := len(tr.sent)
	extra := tr.exec(args)
	var lines []string
	for _, msg := range tr.sent[from:] {
		lines = append(lines, tr.render(msg))
	}
	return strings.Join(append(lines, extra...), "\n")
}

func (tr *transcript) exec(args []string) []string {
	w := tr.world
	switch args[0] {
	case "topics":
		counts := map[string]int32{}
		for _, kv := range args[1:] {
			name, n, _ := strings.Cut(kv, "=")
			counts[name] = int32(atoi(tr.t, n))
		}
		w.topics(counts)
	case "poll":
		w.poll(args[1])
	case "join":
		j := group.Join{Ref: w.nextRef(), Group: "g", InstanceID: args[1], ClientID: args[1]}
		if pattern, ok := strings.CutPrefix(args[2], "pattern="); ok {
			j.TopicPattern = pattern
		} else {
			j.Topics = strings.Split(args[2], ",")
		}
		tr.joins[j.Ref] = args[1]
		w.step(j)
	case "heartbeat":
		w.heartbeat(tr.id(args[1]))
	case "commit":
		tr.commit(args)
	case "release":
		w.release(tr.id(args[1]), -1)
	case "leave":
		w.step(group.Leave{Ref: w.nextRef(), Group: "g", MemberID: tr.id(args[1])})
	case "tick":
		w.advanceTo(w.now.Add(duration(tr.t, args[1])))
	case "revoke":
		topic, p := topicPartition(tr.t, args[1])
		w.step(group.RevokePartition{Ref: w.nextRef(), Group: "g", Topic: topic, Partition: p})
	case "lease":
		topic, p := topicPartition(tr.t, args[1])
		holder := args[2]
		if id, ok := tr.ids[holder]; ok {
			holder = id
		}
		w.step(group.Lease{Ref: w.nextRef(), Group: "g", Topic: topic, Partition: p, Holder: holder, TTL: duration(tr.t, args[3])})
	case "revoke-member":
		w.step(group.RevokeMember{Ref: w.nextRef(), Group: "g", MemberID: tr.id(args[1])})
	case "restart":
		w.restart(duration(tr.t, args[1]))
	case "state":
		return tr.state()
	case "gateways":
		var lines []string
		for _, gw := range w.m.Gateways() {
			lines = append(lines, fmt.Sprintf("%s acked=%d silent=%t", gw.ID, gw.Acked, gw.Silent))
		}
		return lines
	default:
		tr.t.Fatalf("unknown command %q", args[0])
	}
	return nil
}

func (tr *transcript) commit(args []string) {
	c := tr.clients[tr.id(args[1])]
	topic, rest, _ := strings.Cut(args[2], "/")
	p, offset, _ := strings.Cut(rest, "=")
	id := assign.Partition{Topic: topic, Partition: int32(atoi(tr.t, p))}
	epoch := c.held[id].Epoch
	for _, r := range c.revoked {
		if r.Topic == id.Topic && r.Partition == id.Partition {
			epoch = r.Epoch
		}
	}
	release := slices.Contains(args, "release")
	if release {
		c.revoked = slices.DeleteFunc(c.revoked, func(r api.PartitionRef) bool {
			return r.Topic == id.Topic && r.Partition == id.Partition
		})
	}
	tr.step(group.Commit{Ref: tr.nextRef(), Group: "g", MemberID: c.id, Release: release,
		Offsets: []group.CommitOffset{{Topic: topic, Partition: id.Partition, Epoch: epoch, Offset: int64(atoi(tr.t, offset))}}})
}

func (tr *transcript) id(instance string) string {
	id, ok := tr.ids[instance]
	if !ok {
		tr.t.Fatalf("no member for instance %q", instance)
	}
	return id
}

func (tr *transcript) name(id string) string {
	if n, ok := tr.names[id]; ok {
		return n
	}
	return id
}

func (tr *transcript) render(msg group.Message) string {
	switch m := msg.(type) {
	case group.JoinReply:
		inst := tr.joins[m.Ref]
		tr.clients[m.MemberID].instance = inst
		if old, ok := tr.ids[inst]; ok && old != m.MemberID {
			tr.names[old] = inst + "(old)"
		}
		tr.names[m.MemberID], tr.ids[inst] = inst, m.MemberID
		return fmt.Sprintf("join %s: grants=%s", inst, tr.grants(m.Grants))
	case group.News:
		return fmt.Sprintf("news %s:%s", tr.name(m.MemberID), tr.news(m))
	case group.SyncReply:
		s := fmt.Sprintf("sync %s: seq=%d", m.Gateway, m.Seq)
		if m.Reset {
			s += " reset"
		}
		for _, f := range m.Fences {
			s += fmt.Sprintf(" fence=%s/%d@%d", f.Topic, f.Partition, f.Epoch)
		}
		for _, r := range m.RevokedMembers {
			s += " revoked-member=" + tr.name(r.MemberID)
		}
		return s
	case group.CommitReply:
		var parts []string
		for _, c := range m.Committed {
			parts = append(parts, fmt.Sprintf("%s/%d=%d", c.Topic, c.Partition, c.Offset))
		}
		return strings.TrimSpace("commit ok " + strings.Join(parts, " "))
	case group.LeaveReply:
		return "left"
	case group.RevokeReply:
		return fmt.Sprintf("revoke reply: %s/%d fenced at %d", m.Topic, m.Partition, m.Epoch)
	case group.LeaseReply:
		return fmt.Sprintf("lease reply: %s", tr.grants([]group.Grant{m.Grant}))
	case group.RevokeMemberReply:
		return fmt.Sprintf("member revoked: fenced=%d", m.Fenced)
	case group.Rejected:
		return fmt.Sprintf("rejected %s: %s", tr.what[m.Ref], m.Code)
	}
	return fmt.Sprintf("%T", msg)
}

func (tr *transcript) news(n group.News) string {
	s := ""
	if len(n.Revoke) > 0 {
		var refs []string
		for _, r := range n.Revoke {
			refs = append(refs, fmt.Sprintf("%s/%d@%d", r.Topic, r.Partition, r.Epoch))
		}
		s += " revoke=[" + strings.Join(refs, " ") + "]"
	}
	if len(n.Grants) > 0 {
		s += " grants=" + tr.grants(n.Grants)
	}
	if len(n.Renew) > 0 {
		s += " renew=" + tr.grants(n.Renew)
	}
	if s == "" {
		s = " (nothing)"
	}
	return s
}

func (tr *transcript) grants(gs []group.Grant) string {
	var parts []string
	for _, g := range gs {
		from := strconv.FormatInt(g.Offset, 10)
		switch g.Offset {
		case group.OffsetEarliest:
			from = "earliest"
		case group.OffsetLatest:
			from = "latest"
		}
		holder := ""
		if g.Outside {
			holder = g.Holder + ":"
		}
		parts = append(parts, fmt.Sprintf("%s%s/%d@%d from=%s exp=%s", holder, g.Topic, g.Partition, g.Epoch, from, g.ExpiresAt.Sub(tr.now)))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func (tr *transcript) state() []string {
	var lines []string
	for _, p := range tr.describe("g").Partitions {
		s := fmt.Sprintf("%s/%d epoch=%d %s %s", p.Topic, p.Partition, p.Epoch, p.State, tr.name(p.Owner))
		if p.State == group.Revoking {
			s += fmt.Sprintf("@%d -> %s", p.OwnerEpoch, tr.name(p.Target))
		}
		if p.Committed >= 0 {
			s += fmt.Sprintf(" committed=%d", p.Committed)
		}
		lines = append(lines, s)
	}
	return lines
}

func atoi(t testing.TB, s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func duration(t testing.TB, s string) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func topicPartition(t testing.TB, s string) (string, int32) {
	topic, p, _ := strings.Cut(s, "/")
	return topic, int32(atoi(t, p))
}
