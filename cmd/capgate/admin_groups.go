package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/client"
	"github.com/capgate/capgate/coordinator"
)

func groupPath(group string) string { return "/v1/admin/groups/" + url.PathEscape(group) }

// groupFirst is args, then the first argument checked as a group name
// (groupArg): `admin group a/b` went out as another route and came back 404.
func groupFirst(args cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, a []string) error {
		if err := args(cmd, a); err != nil {
			return err
		}
		return groupArg(a[0])
	}
}

// newAdminGroup is `admin group GROUP` (describe, as `admin group
// describe GROUP`) and `admin group delete GROUP [--force]`.
func newAdminGroup(f *adminFlags) *cobra.Command {
	describe := func(cmd *cobra.Command, a []string) error {
		err := callRender(cmd, f, http.MethodGet, groupPath(a[0]), nil, printGroupDescription)
		if hasCode(err, api.CodeNotFound) && (a[0] == "list" || a[0] == "ls") {
			// rpk group list: the word was taken as a group's name.
			return fmt.Errorf("%w (did you mean `capgate admin groups`?)", err)
		}
		return err
	}
	cmd := &cobra.Command{
		Use:   "group GROUP | group describe|delete GROUP",
		Short: "Describe a group (members, partitions, owners, epochs, committed offsets, lag), or delete it",
		Args:  groupFirst(cobra.ExactArgs(1)),
		RunE:  describe,
	}
	var force bool
	del := &cobra.Command{
		Use:   "delete GROUP [--force]",
		Short: "Delete a group: its committed offsets, settings and leases; refused while members are alive unless --force",
		Long: `Delete a group: its committed offsets, settings and leases go, and it no
longer lists or describes. While the group has live members (or outside
lease holders) the coordinator refuses (409): they would carry on without
offsets. --force revokes each member first, as revoke-member does (its
capabilities are refused by every gateway at once, its session ends) and
ends each lease; members that come back join a new, empty group.`,
		Args: groupFirst(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			path := groupPath(a[0])
			if force {
				path += "?force=true"
			}
			err := call(cmd, f, http.MethodDelete, path, nil)
			if !force && hasCode(err, api.CodeConflict) {
				// The server says "delete with force": the CLI's word for it.
				return fmt.Errorf("%w (pass --force to revoke them first: capgate admin group delete %s --force)", err, a[0])
			}
			return err
		},
	}
	del.Flags().BoolVar(&force, "force", false, "revoke live members and end leases first")
	cmd.AddCommand(&cobra.Command{
		Use: "describe GROUP", Short: "Describe a group, as rpk group describe", Args: groupFirst(cobra.ExactArgs(1)), RunE: describe,
	}, del)
	return cmd
}

// hasCode reports whether err is an API error with code.
func hasCode(err error, code api.Code) bool {
	var e *api.Error
	return errors.As(err, &e) && e.Code == code
}

// newAdminOffsets is `admin offsets GROUP` (the committed offsets) and
// `admin offsets reset GROUP TOPIC [PARTITION] --to …`.
func newAdminOffsets(f *adminFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "offsets GROUP | offsets reset GROUP TOPIC [PARTITION] --to earliest|latest|OFFSET",
		Short: "Committed offsets of a group, or reset them",
		Args:  groupFirst(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			var out json.RawMessage
			if err := c.do(cmd.Context(), http.MethodGet, "/v1/groups/"+url.PathEscape(a[0])+"/offsets", nil, &out); err != nil {
				return err
			}
			if r, err := decode[api.OffsetsResponse](out); err == nil && len(r.Offsets) == 0 {
				// The route answers an unknown group with no offsets (as
				// Kafka's OffsetFetch): a mistyped name printed an empty
				// table and exited 0. Ask whether the group exists.
				err := c.do(cmd.Context(), http.MethodGet, groupPath(a[0])+"?limit=1", nil, nil)
				if hasCode(err, api.CodeNotFound) {
					return fmt.Errorf("%w (capgate admin groups lists them)", err)
				}
			}
			return f.print(cmd.OutOrStdout(), out, printOffsets)
		},
	}
	var to, metadata string
	var force bool
	reset := &cobra.Command{
		Use:   "reset GROUP TOPIC [PARTITION] --to earliest|latest|OFFSET [--force]",
		Short: "Set committed offsets, also backwards; held partitions are fenced first and regranted from there",
		Long: `Set a group's committed offset of one partition, or of every partition of
the topic the group has, to an offset, or to the earliest or latest offset
Kafka has now (start and end say the same, as consume -o and rpk group
seek --to). It also moves offsets backwards (the only way one does).
A partition a member holds is fenced first, as a revoke does, and granted
again from the new offset; commits its old holder still makes under the
old epoch are refused, so nothing in flight moves the offset again.
Nobody needs to stop: capgate's own consumers (capgate consume, the SDK)
read on from the new offset, and a Kafka client reading through a
gateway's Kafka listener (kcat -G, kgo, KafkaJS, Java) is told as in a
rebalance — it gives the partition up (its commits from its old position
are refused as stale) and gets it again, reading from the new offset.
Kafka's own --reset-offsets wants an inactive group; capgate's does not.

A partition leased to a holder outside the group (admin lease to a name
that is no member) cannot be granted again: the holder has no session,
and the fence ends its lease. Such a reset is refused (409, naming the
holder and until; for a whole topic before any partition is reset):
revoke the partition first (capgate admin revoke GROUP TOPIC PARTITION,
which ends the lease), or pass --force to end the lease with the reset.
The answer then names each lease it ended (lease_ended; in a table, the
LEASE-ENDED column).`,
		Args: groupFirst(cobra.RangeArgs(2, 3)),
		RunE: func(cmd *cobra.Command, a []string) error {
			body := map[string]any{}
			if force {
				body["force"] = true
			}
			switch to {
			case "earliest", "start", "beginning": // consume -o's words, rpk group seek's, kcat's
				body["to"] = "earliest"
			case "latest", "end":
				body["to"] = "latest"
			default:
				n, err := strconv.ParseInt(to, 10, 64)
				if err != nil || n < 0 {
					return usageErrorf("--to %q: want earliest (start), latest (end) or an offset ≥ 0", to)
				}
				body["offset"] = n
			}
			if metadata != "" {
				body["metadata"] = metadata
			}
			return resetOffsets(cmd, f, a, body, force)
		},
	}
	reset.Flags().StringVar(&to, "to", "", "earliest (or start, beginning), latest (or end), or an offset")
	reset.Flags().StringVar(&metadata, "metadata", "", "commit metadata to store with the offset")
	reset.Flags().BoolVar(&force, "force", false, "also reset partitions leased to a holder outside the group, ending their leases")
	reset.MarkFlagRequired("to")
	cmd.AddCommand(reset)
	return cmd
}

// resetOffsets resets one partition, or every partition of the topic the
// group describes, and prints the results. Without force, a topic's
// partitions leased to an outside holder refuse the whole reset before
// any partition moves (the server refuses each one too: 409).
func resetOffsets(cmd *cobra.Command, f *adminFlags, a []string, body map[string]any, force bool) error {
	if err := topicArg(a[1]); err != nil {
		return err
	}
	c, err := f.client()
	if err != nil {
		return err
	}
	partitions := a[2:]
	if len(partitions) == 0 {
		var leased []string
		if partitions, leased, err = groupPartitions(cmd, c, a[0], a[1]); err != nil {
			return err
		}
		if len(leased) > 0 && !force {
			return fmt.Errorf("nothing reset: %s of group %s leased outside the group (%s); a reset would end the lease: revoke the partition first (capgate admin revoke %s %s PARTITION), or pass --force to end the leases",
				a[1], a[0], strings.Join(leased, ", "), a[0], a[1])
		}
	}
	var results []coordinator.OffsetResetResponse
	for _, p := range partitions {
		path, err := partitionPath(a[0], a[1], p)
		if err != nil {
			return err
		}
		var out coordinator.OffsetResetResponse
		if err := c.do(cmd.Context(), http.MethodPut, path+"/offset", body, &out); err != nil {
			if !force && hasCode(err, api.CodeConflict) {
				// The server says "reset with force": the CLI's word for it.
				return fmt.Errorf("%w (capgate admin revoke %s %s %s, or pass --force)", err, a[0], a[1], p)
			}
			return err
		}
		results = append(results, out)
	}
	raw, _ := json.Marshal(map[string]any{"reset": results})
	return f.print(cmd.OutOrStdout(), raw, func(w io.Writer, _ json.RawMessage) error {
		return printResets(w, results)
	})
}

// printResets is the reset table; a LEASE-ENDED column when a forced
// reset ended an outside lease.
func printResets(w io.Writer, results []coordinator.OffsetResetResponse) error {
	header := []string{"GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"}
	ended := slices.ContainsFunc(results, func(r coordinator.OffsetResetResponse) bool { return r.LeaseEnded != nil })
	if ended {
		header = append(header, "LEASE-ENDED")
	}
	rows := make([][]string, len(results))
	for i, r := range results {
		rows[i] = []string{r.Group, r.Topic, strconv.Itoa(int(r.Partition)), strconv.FormatInt(r.Offset, 10)}
		if !ended {
			continue
		}
		lease := "-"
		if l := r.LeaseEnded; l != nil {
			lease = l.Holder + " (until " + l.Until + ")"
		}
		rows[i] = append(rows[i], cellText(lease))
	}
	return printTable(w, header, rows)
}

// groupPartitions lists the partitions of topic the group has, every
// page, and those of them leased to an outside holder ("P: holder").
func groupPartitions(cmd *cobra.Command, c *adminClient, group, topic string) (out, leased []string, err error) {
	after := ""
	for {
		path := groupPath(group)
		if after != "" {
			path += "?partitions_after=" + url.QueryEscape(after)
		}
		var d coordinator.GroupDescription
		if err := c.do(cmd.Context(), http.MethodGet, path, nil, &d); err != nil {
			return nil, nil, err
		}
		for _, p := range d.Partitions {
			if p.Topic != topic {
				continue
			}
			out = append(out, strconv.Itoa(int(p.Partition)))
			if p.Lease != nil && p.Lease.Outside {
				leased = append(leased, strconv.Itoa(int(p.Partition))+": "+p.Lease.Holder+" until "+p.Lease.Until)
			}
		}
		if after = d.NextPartitionsAfter; after == "" {
			break
		}
	}
	if len(out) == 0 {
		return nil, nil, fmt.Errorf("group %s has no partition of topic %s: name the PARTITION", group, topic)
	}
	return out, leased, nil
}

// newAdminAudit is `admin audit`: the coordinator's audit log.
func newAdminAudit(f *adminFlags) *cobra.Command {
	var limit int
	var before uint64
	var filters auditFilterFlags
	cmd := &cobra.Command{
		Use:   "audit [--limit N] [--before SEQ] [--action A] [--who W] [--target PREFIX] [--exclude-action A] [--exclude-target PREFIX]",
		Short: "The admin audit log: who did what to which target, why, and how it ended (newest first)",
		Long: `The admin actions the coordinator has seen since it started, newest
first: who, what, the target, the reason given and the result.

It is kept in memory (the newest coordinator.audit_entries_max, 10,000):
a restart starts it empty again. Seqs never repeat across restarts (a
run's first is the unix microsecond of its first action, then one more
per entry), so a --before SEQ from before a restart lists nothing of the
new run. The durable record is the coordinator's log: one
"admin action" line per entry (info; warn when refused), kept wherever
its logs are shipped.

The coordinator filters: --action and --who are exact (who as listed:
token:<12 hex>, cert:<name>, console:<user>), --target a prefix; each
takes up to 16 values (repeat the flag: a comma is part of a value, as
in a group or certificate name), any of which matches; --exclude-action and --exclude-target drop what
they match. --limit counts what the filters keep, and --before pages
through it with the same filters. capgate produce mints one capability
per partition it writes (holder capgate-produce): hide them with
--exclude-target capgate-produce@.`,
		Example: `  capgate admin audit --exclude-target capgate-produce@ --limit 5
  capgate admin audit --action partition_revoke --action member_revoke --target orders-eu/`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 0 {
				return usageErrorf("--limit: must be >= 1 (0: the coordinator's default), got %d", limit)
			}
			q := filters.query()
			if limit > 0 {
				q.Set("limit", strconv.Itoa(limit))
			}
			if before > 0 {
				q.Set("before", strconv.FormatUint(before, 10))
			}
			path := "/v1/admin/audit"
			if len(q) > 0 {
				path += "?" + q.Encode()
			}
			return callRender(cmd, f, http.MethodGet, path, nil, printAudit)
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 0, "at most this many entries (default: the coordinator's, 100)")
	cmd.Flags().Uint64Var(&before, "before", 0, "only entries older than this seq (next_before of the last page)")
	filters.register(cmd)
	return cmd
}

// auditFilterFlags are admin audit's filters, sent as the API's filter
// parameters, one occurrence per value.
type auditFilterFlags struct {
	action, who, target, excludeAction, excludeTarget []string
}

func (a *auditFilterFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringArrayVar(&a.action, "action", nil, "only these actions (exact: partition_revoke, capabilities, group_config, ...)")
	fl.StringArrayVar(&a.who, "who", nil, "only these admins (exact, as the WHO column shows them)")
	fl.StringArrayVar(&a.target, "target", nil, "only targets starting with one of these")
	fl.StringArrayVar(&a.excludeAction, "exclude-action", nil, "not these actions (exact)")
	fl.StringArrayVar(&a.excludeTarget, "exclude-target", nil, "not targets starting with one of these (capgate-produce@: capgate produce's grants)")
}

// query is the filters as query parameters.
func (a *auditFilterFlags) query() url.Values {
	q := url.Values{}
	for name, values := range map[string][]string{
		"action": a.action, "who": a.who, "target": a.target,
		"exclude_action": a.excludeAction, "exclude_target": a.excludeTarget,
	} {
		for _, v := range values {
			q.Add(name, v)
		}
	}
	return q
}

func printOffsets(w io.Writer, raw json.RawMessage) error {
	r, err := decode[api.OffsetsResponse](raw)
	if err != nil {
		return err
	}
	rows := make([][]string, len(r.Offsets))
	for i, o := range r.Offsets {
		rows[i] = []string{o.Topic, strconv.Itoa(int(o.Partition)), strconv.FormatInt(o.Offset, 10), cellText(o.Metadata)}
	}
	return printTable(w, []string{"TOPIC", "PARTITION", "OFFSET", "METADATA"}, rows)
}

func decode[T any](raw json.RawMessage) (T, error) {
	var v T
	err := json.Unmarshal(raw, &v)
	return v, err
}

// printPage is one page of a list as a table, and the after= of the next
// page when there is one.
func printPage(w io.Writer, headers []string, rows [][]string, nextAfter string) error {
	if err := printTable(w, headers, rows); err != nil {
		return err
	}
	if nextAfter != "" {
		fmt.Fprintf(w, "(more after %s)\n", quoteUnsafe(nextAfter))
	}
	return nil
}

func printGateways(w io.Writer, raw json.RawMessage) error {
	r, err := decode[coordinator.GatewaysResponse](raw)
	if err != nil {
		return err
	}
	rows := make([][]string, len(r.Gateways))
	for i, g := range r.Gateways {
		rows[i] = []string{g.ID, strconv.FormatUint(g.Acked, 10), strconv.FormatUint(g.Lag, 10), cellText(g.LastSeen), strconv.FormatBool(g.Silent),
			strconv.FormatUint(g.Conflicts, 10)}
	}
	fmt.Fprintf(w, "SYNC-SEQ  %d\n\n", r.Seq)
	if err := printTable(w, []string{"GATEWAY", "ACKED-SEQ", "BEHIND", "LAST-SEEN", "SILENT", "ID-CONFLICTS"}, rows); err != nil {
		return err
	}
	for _, g := range r.Gateways {
		if g.Conflicts > 0 {
			fmt.Fprintf(w, "\nwarning: another gateway process polled under id %q (%d refused, last at %s): give each gateway its own gateway.id\n", g.ID, g.Conflicts, g.LastConflict)
		}
	}
	return nil
}

// printGroupDescription lays a group out as rpk group describe does: a
// key/value block, then one row per partition; then the members.
func printGroupDescription(w io.Writer, raw json.RawMessage) error {
	d, err := decode[coordinator.GroupDescription](raw)
	if err != nil {
		return err
	}
	var lag int64
	lagKnown := false
	for _, p := range d.Partitions {
		if p.Lag != nil {
			lag += *p.Lag
			lagKnown = true
		}
	}
	totalLag := "-"
	if lagKnown {
		totalLag = strconv.FormatInt(lag, 10)
	}
	if err := printFields(w, [][2]string{
		{"group", d.Group}, {"state", groupState(d)}, {"creator", creatorText(d)}, {"assignor", d.Config.Assignor}, {"offset-reset", d.Config.OffsetReset},
		{"members", strconv.Itoa(len(d.Members))}, {"partitions", strconv.Itoa(len(d.Partitions))},
		{"total-lag", totalLag},
	}); err != nil {
		return err
	}
	fmt.Fprintln(w)
	rows := make([][]string, len(d.Partitions))
	for i, p := range d.Partitions {
		owner := p.Owner
		if p.State == "revoking" && p.Target != "" {
			owner += " -> " + p.Target
		}
		lease := "-"
		if p.Lease != nil {
			lease = p.Lease.Holder + " until " + p.Lease.Until
		}
		rows[i] = []string{p.Topic, strconv.Itoa(int(p.Partition)), p.State, strconv.FormatUint(p.Epoch, 10),
			optInt(p.Committed), optInt(p.LatestOffset), optInt(p.Lag), cellText(owner), lease}
	}
	if err := printTable(w, []string{"TOPIC", "PARTITION", "STATE", "EPOCH", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "OWNER", "LEASE"}, rows); err != nil {
		return err
	}
	if len(d.Members) > 0 {
		fmt.Fprintln(w)
		rows = make([][]string, len(d.Members))
		for i, m := range d.Members {
			topics := strings.Join(m.Topics, ",")
			if m.TopicPattern != "" {
				// Said so: a bare "^de" read as a topic's name (newuser5).
				topics = "pattern " + m.TopicPattern
			}
			credential, name := "", ""
			if c := m.Credential; c != nil {
				credential = c.ID
				if c.Subject != c.ID {
					name = c.Subject
				}
			}
			rows[i] = []string{m.ID, cellText(m.ClientID), cellText(m.InstanceID), cellText(credential), cellText(name),
				strconv.Itoa(m.Partitions), cellText(topics), cellText(m.LastContact)}
		}
		// CREDENTIAL is the id revoke-capability denies to stop a member
		// for good (revoke-member only removes it: it joins again).
		if err := printTable(w, []string{"MEMBER-ID", "CLIENT-ID", "INSTANCE-ID", "CREDENTIAL", "CREDENTIAL-NAME", "PARTITIONS", "TOPICS", "LAST-CONTACT"}, rows); err != nil {
			return err
		}
		printPatternsMatchingNothing(w, d.Members)
	}
	if d.NextMembersAfter != "" || d.NextPartitionsAfter != "" {
		fmt.Fprintln(w, "(more: --output json shows the next_* cursors)")
	}
	return nil
}

// printPatternsMatchingNothing says which members' topic pattern matches
// no topic (topic_pattern_matches 0), as the SDK warns at its join: the
// group read Stable with 0 partitions and nothing said why (newuser5 #19).
func printPatternsMatchingNothing(w io.Writer, members []coordinator.MemberView) {
	var patterns []string
	ids := map[string][]string{}
	for _, m := range members {
		if n := m.TopicPatternMatches; n != nil && *n == 0 {
			if ids[m.TopicPattern] == nil {
				patterns = append(patterns, m.TopicPattern)
			}
			ids[m.TopicPattern] = append(ids[m.TopicPattern], m.ID)
		}
	}
	for _, p := range patterns {
		fmt.Fprintf(w, "\npattern %s of %s: %s\n", p, strings.Join(ids[p], ", "), client.NoTopicMatches(p))
	}
}

// groupState is a group's state in rpk's words, from this page of its
// description: Empty without live members, Rebalancing while a partition
// is being revoked (moving to another member) or a move waits for the
// group's max_moves_per_second (it read Stable between two creeping
// handoffs while a newcomer still waited: newuser7), else Stable.
func groupState(d coordinator.GroupDescription) string {
	revoking := slices.ContainsFunc(d.Partitions, func(p coordinator.PartitionView) bool { return p.State == "revoking" })
	return stateWords(len(d.Members), d.MovesHeldBack, d.Config.MaxMovesPerSecond, revoking)
}

// stateWords is groupState's rule, for a description or a summary.
func stateWords(members, movesHeldBack, maxMovesPerSecond int, revoking bool) string {
	switch {
	case members == 0:
		return "Empty"
	case movesHeldBack > 0:
		return fmt.Sprintf("Rebalancing (%d moves held back by max_moves_per_second %d)", movesHeldBack, maxMovesPerSecond)
	case revoking:
		return "Rebalancing"
	}
	return "Stable"
}

// creatorText is a group's creator as a person reads it: the name of the
// credential that created it next to its id (a client credential's jti,
// an OAuth client's "oauth:<client_id>", an IdP identity's id). The
// group keeps the name (creator_name) whether or not members are live;
// for a group created before it did, a member of this page that joined
// with that credential names it; else the id alone.
func creatorText(d coordinator.GroupDescription) string {
	if d.Creator == "" {
		return "-"
	}
	if d.CreatorName != "" {
		return d.CreatorName + " (" + d.Creator + ")"
	}
	for _, m := range d.Members {
		if c := m.Credential; c != nil && c.ID == d.Creator && c.Subject != "" && c.Subject != d.Creator {
			return c.Subject + " (" + d.Creator + ")"
		}
	}
	return d.Creator
}

func optInt(v *int64) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatInt(*v, 10)
}

func printQoS(w io.Writer, raw json.RawMessage) error {
	r, err := decode[coordinator.QoSListResponse](raw)
	if err != nil {
		return err
	}
	return printOverrides(w, r.Overrides)
}

// printQoSOverride is the answer of `qos` and `qos end`, one override,
// as a row of `qos list`: it was the generic key/value table, with the
// selector as raw JSON ({"group":"demo"}) where the list says
// group=demo (newuser12).
func printQoSOverride(w io.Writer, raw json.RawMessage) error {
	o, err := decode[api.QoSOverride](raw)
	if err != nil {
		return err
	}
	return printOverrides(w, []api.QoSOverride{o})
}

func printOverrides(w io.Writer, overrides []api.QoSOverride) error {
	rows := make([][]string, len(overrides))
	for i, o := range overrides {
		rows[i] = []string{o.ID, selectorText(o.Selector), cellText(o.LogLevel), cellText(o.Monitor), strconv.FormatInt(o.MaxBytesPerSec, 10), unixText(o.Until)}
	}
	return printTable(w, []string{"ID", "SELECTOR", "LOG-LEVEL", "MONITOR", "MAX-BYTES/S", "UNTIL"}, rows)
}

func selectorText(s api.QoSSelector) string {
	return cellText(strings.Join(s.Parts(), ","))
}

func printAudit(w io.Writer, raw json.RawMessage) error {
	r, err := decode[coordinator.AuditResponse](raw)
	if err != nil {
		return err
	}
	rows := make([][]string, len(r.Entries))
	for i, e := range r.Entries {
		rows[i] = []string{strconv.FormatUint(e.Seq, 10), e.At, e.Who, e.Action, cellText(e.Target), cellText(e.Details), cellText(e.Reason), e.Result}
	}
	if err := printTable(w, []string{"SEQ", "AT", "WHO", "ACTION", "TARGET", "DETAILS", "REASON", "RESULT"}, rows); err != nil {
		return err
	}
	if r.NextBefore != 0 {
		fmt.Fprintf(w, "(older: --before %d)\n", r.NextBefore)
	}
	return nil
}

var errNoSelector = usageErrorf("name at least one selector: --group, --topic, --partition, --holder or --jti")

// unixText is unix seconds as RFC 3339 (UTC).
func unixText(s int64) string { return time.Unix(s, 0).UTC().Format(time.RFC3339) }

// msText is a duration the API gives in milliseconds, in Go's units.
func msText(ms int64) string { return (time.Duration(ms) * time.Millisecond).String() }
