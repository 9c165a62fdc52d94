package main

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/capgate/capgate/ocap"
)

func newAdminRevoke(f *adminFlags) *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "revoke GROUP TOPIC PARTITION",
		Short: "Fence a partition and reassign it; returns once every gateway is safe",
		Args:  cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, a []string) error {
			path, err := partitionPath(a[0], a[1], a[2])
			if err != nil {
				return err
			}
			return call(cmd, f, http.MethodPost, path+"/revoke", reasonBody(reason))
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "reason kept in the audit log")
	return cmd
}

func newAdminLease(f *adminFlags) *cobra.Command {
	var holder string
	var force bool
	ttl := &ttlFlag{name: "ttl", field: "ttl_ms", min: time.Second, lasts: "a lease's capability"}
	cmd := &cobra.Command{
		Use:   "lease GROUP TOPIC PARTITION --holder NAME --ttl 10m",
		Short: "Hand a partition exclusively to a member or a named outside holder for a while",
		Long: `Pins a partition to a member or a named outside holder until --ttl has
passed (the answer's until): nobody else is granted it meanwhile.

An outside holder gets a capability in the answer (capability, jti,
expires_at). It lives at most the coordinator's max_lease (10m by
default), however long --ttl is: to keep reading, the holder runs the
same lease again before expires_at — same epoch, a new capability, the
pin unchanged. A member gets its capability in its heartbeats.

A partition leased to another holder is refused (409, naming the holder
and the lease's end) unless --force: then the lease moves and the other
holder's capability is fenced.`,
		Args: cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, a []string) error {
			path, err := partitionPath(a[0], a[1], a[2])
			if err != nil {
				return err
			}
			if err := ttl.check(); err != nil {
				return err
			}
			err = call(cmd, f, http.MethodPost, path+"/lease", map[string]any{"holder": holder, "ttl_ms": ttl.ms(), "force": force})
			if !force {
				err = leaseForceHint(err, a, holder)
			}
			return ttl.refused(err)
		},
	}
	cmd.Flags().StringVar(&holder, "holder", "", "member id or outside holder name")
	cmd.Flags().BoolVar(&force, "force", false, "move a lease another holder has (its capability is fenced)")
	newTTLFlag(cmd.Flags(), ttl, 10*time.Minute, "how long the lease pins the partition (at least 1s, at most the coordinator's groups.limits.lease_ttl_max); the capability it hands out lives at most max_lease (10m): the holder runs lease again to renew it")
	cmd.MarkFlagRequired("holder")
	return cmd
}

func newAdminGrant(f *adminFlags) *cobra.Command {
	var topic, holder, ops string
	var partition int32
	ttl := &ttlFlag{name: "ttl", field: "ttl_ms", min: time.Second, lasts: "a capability"}
	var from, to int64
	cmd := &cobra.Command{
		Use:   "grant --topic T --partition P --holder NAME",
		Short: "Mint a shared (non-exclusive) capability, fenced by its jti only",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := ttl.check(); err != nil {
				return err
			}
			if err := opsArg(strings.Split(ops, ","), ocap.ParseOps); err != nil {
				return err
			}
			body := map[string]any{"topic": topic, "partition": partition, "ops": strings.Split(ops, ","), "ttl_ms": ttl.ms(), "holder": holder}
			if cmd.Flags().Changed("offset-from") {
				body["offset_from"] = from
			}
			if cmd.Flags().Changed("offset-to") {
				body["offset_to"] = to
			}
			return ttl.refused(call(cmd, f, http.MethodPost, "/v1/admin/capabilities", body))
		},
	}
	cmd.Flags().StringVar(&topic, "topic", "", "topic")
	cmd.Flags().Int32Var(&partition, "partition", 0, "partition")
	cmd.Flags().StringVar(&holder, "holder", "", "holder name (the capability's sub)")
	cmd.Flags().StringVar(&ops, "ops", "fetch", "comma-separated ops: fetch, commit, produce")
	newTTLFlag(cmd.Flags(), ttl, 5*time.Minute, "lease of the capability (at least 1s, at most the coordinator's max_lease)")
	cmd.Flags().Int64Var(&from, "offset-from", 0, "first offset the capability may read")
	cmd.Flags().Int64Var(&to, "offset-to", 0, "offset the capability may not reach")
	// Checked here, before anything is sent: the server's 400 for a
	// missing holder named the JSON field, not the flag.
	for _, name := range []string{"topic", "partition", "holder"} {
		cmd.MarkFlagRequired(name)
	}
	return cmd
}

// opsArg checks an --ops list with parse (ocap's, the server's own
// check) before anything is sent: "--ops fetch,write" went out and came
// back a 400, exit 1 (newuser7); it is a usage error, exit 2.
func opsArg(names []string, parse func([]string) (ocap.Ops, error)) error {
	if _, err := parse(names); err != nil {
		return usageErrorf("--ops %s: %s", strings.Join(names, ","), strings.TrimPrefix(err.Error(), "ocap: "))
	}
	return nil
}

func newAdminRevokeCapability(f *adminFlags) *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "revoke-capability JTI",
		Short: "Deny one capability id (and every capability attenuated from it)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, a []string) error {
			if err := jtiArg(a[0]); err != nil {
				return err
			}
			return call(cmd, f, http.MethodPost, "/v1/admin/capabilities/"+url.PathEscape(a[0])+"/revoke", reasonBody(reason))
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "reason kept in the audit log")
	return cmd
}

func newAdminRevokeMember(f *adminFlags) *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "revoke-member GROUP MEMBER",
		Short: "Remove a member, fence its partitions and deny its capabilities",
		Long: `Ends a member's session: its partitions are fenced (every gateway
refuses its capabilities at once) and handed to the other members.

It does not stop the client: the credential it joined with is still
good, so a consumer such as capgate consume joins again as a new member
at once, as Kafka consumers do after RemoveMembersFromConsumerGroup, and
warns that it did ("member revoked by an administrator: joining again",
naming the credential's jti). To keep a client out, deny its
credential: capgate admin revoke-capability JTI with the credential's
jti (admin group G -o json: members[].credential.id) — every member it
opened ends, and its joins are refused.

It repeats safely: a member revoked already, whose revocation still runs
(at least capability_lease), is answered already_revoked: true, nothing
done — repeat a revoke whose answer was lost (a timeout, a 503 saying
it may have been applied).`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, a []string) error {
			if err := groupArg(a[0]); err != nil {
				return err
			}
			if err := memberArg(a[0], a[1]); err != nil {
				return err
			}
			return call(cmd, f, http.MethodPost, groupPath(a[0])+"/members/"+url.PathEscape(a[1])+"/revoke", reasonBody(reason))
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "reason kept in the audit log")
	return cmd
}

// reasonBody is the body of a revoke: the reason, when given.
func reasonBody(reason string) map[string]any {
	if reason == "" {
		return map[string]any{}
	}
	return map[string]any{"reason": reason}
}

func newAdminQoS(f *adminFlags) *cobra.Command {
	var sel qosSelectorFlags
	var level, monitor string
	var clear []string
	var bps int64
	ttl := &ttlFlag{name: "ttl", field: "ttl_ms", min: time.Millisecond, lasts: "an override"}
	cmd := &cobra.Command{
		Use:   "qos [--group G] [--topic T] [--partition P] [--holder H] [--jti J] [--log-level debug] [--monitor TAG] [--max-bytes-per-sec N] [--clear log_level,monitor] | qos list | qos end",
		Short: "Change a consumer's or a partition's log level, monitor tag or byte rate live on every gateway",
		Long: `Set a QoS override for a selector, pushed to every gateway at once. A
second qos for the same selector merges into the first: the settings it
names replace the earlier ones, the others stay (--max-bytes-per-sec 0
removes a rate, --clear log_level,monitor takes a log level or a monitor
tag off), and --ttl starts again. qos list shows those in force; qos end
with the same selector ends one now (it would last until its --ttl, 1h
by default).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			selector, err := sel.selector(cmd)
			if err != nil {
				return err
			}
			if err := ttl.check(); err != nil {
				return err
			}
			clears, err := qosClears(clear, level, monitor)
			if err != nil {
				return err
			}
			body := map[string]any{"selector": selector, "ttl_ms": ttl.ms()}
			if len(clears) > 0 {
				body["clear"] = clears
			}
			if level != "" {
				body["log_level"] = level
			}
			if monitor != "" {
				body["monitor"] = monitor
			}
			if cmd.Flags().Changed("max-bytes-per-sec") {
				body["max_bytes_per_sec"] = bps
			}
			return ttl.refused(callRender(cmd, f, http.MethodPut, "/v1/admin/qos", body, printQoSOverride))
		},
	}
	fl := cmd.Flags()
	sel.register(fl)
	fl.StringVar(&level, "log-level", "", "per-capability log level (debug, info, warn, error)")
	fl.StringVar(&monitor, "monitor", "", "monitor tag (a metrics label)")
	fl.Int64Var(&bps, "max-bytes-per-sec", 0, "byte-rate limit (0 = unlimited)")
	fl.StringSliceVar(&clear, "clear", nil, "take the override's log_level and/or monitor off (comma-separated, or the flag again)")
	newTTLFlag(fl, ttl, time.Hour, "how long the override lasts (at most the coordinator's groups.limits.qos_ttl_max)")
	cmd.AddCommand(adminGetRender(f, "list", "List the QoS overrides in force", func([]string) string { return "/v1/admin/qos" }, 0, printQoS),
		newAdminQoSEnd(f))
	return cmd
}

func newAdminConfig(f *adminFlags) *cobra.Command {
	var moves int
	handoff := &ttlFlag{name: "handoff-timeout", field: "handoff_timeout_ms", min: time.Millisecond, lasts: "a handoff's wait"}
	var reset string
	cmd := &cobra.Command{
		Use:   "config GROUP [--max-moves-per-second N] [--handoff-timeout D] [--offset-reset earliest|latest]",
		Short: "Show a group's settings, or change them",
		Long: `Without a setting, prints the group's settings (assignor, session and
handoff timeouts, max moves per second, offset reset). With one or more,
changes those and prints the settings as they are now.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, a []string) error {
			body := map[string]any{}
			if cmd.Flags().Changed("max-moves-per-second") {
				body["max_moves_per_second"] = moves
			}
			if cmd.Flags().Changed("handoff-timeout") {
				if err := handoff.check(); err != nil {
					return err
				}
				body["handoff_timeout_ms"] = handoff.ms()
			}
			if moves < 0 {
				return usageErrorf("--max-moves-per-second %d is below 0 (0: unlimited)", moves)
			}
			if reset != "" {
				body["offset_reset"] = reset
			}
			if err := groupArg(a[0]); err != nil {
				return err
			}
			if len(body) == 0 {
				return showGroupConfig(cmd, f, a[0])
			}
			return handoff.refused(callRender(cmd, f, http.MethodPut, groupPath(a[0])+"/config", body, printGroupConfig))
		},
	}
	cmd.Flags().IntVar(&moves, "max-moves-per-second", 0, "creep: partitions moved per second at most (0 = unlimited)")
	newTTLFlag(cmd.Flags(), handoff, 0, "how long a handoff waits for the old holder's release (at most the coordinator's groups.handoff_timeout_max, 5m)")
	cmd.Flags().StringVar(&reset, "offset-reset", "", "where a partition with no committed offset starts: earliest or latest")
	return cmd
}

func newAdminClientCredential(f *adminFlags) *cobra.Command {
	var name string
	var groups, topics, ops []string
	ttl := &ttlFlag{name: "ttl", field: "ttl_ms", min: time.Second, zero: "the coordinator's member_token_ttl", lasts: "a credential"}
	cmd := &cobra.Command{
		Use:   "client-credential --name svc --groups g1,orders-* [--topics t1] [--ops consume,produce]",
		Short: "Mint a client credential that may join the given groups (and, with --ops produce, write)",
		Long: `Mint a client credential. --groups and --topics take exact names, "*"
(any) or prefixes ending in "*" ("orders-*": every name that starts with
"orders-", as Kafka's prefixed ACLs); a "*" anywhere else is refused.
Without --topics it may subscribe to any topic.

--ops says what it allows (default: consume only):
  consume  join the --groups for the --topics and read through them: the
           coordinator grants its members partition capabilities, and
           Kafka clients join groups, fetch and commit through a gateway's
           Kafka listener. Required.
  produce  also write records to each topic --topics names exactly: over
           HTTP (capgate produce --credential-file, the gateway's POST
           /v1/topics/T/records or .../partitions/P/records with the
           credential as the bearer) and through a gateway's Kafka listener
           (Produce, SASL with the credential); "*" and prefix patterns
           never allow writing. Needs at least one exact topic.
A credential minted before --ops existed allows consume only.

The answer's client_credential is what consume and produce
--credential-file read:
  capgate admin client-credential --name svc --groups g1 > svc.json
  capgate consume --credential-file svc.json --group g1 --topic demo
  capgate admin client-credential --name ingest --groups ingest --topics orders --ops consume,produce > ingest.json
  echo hello | capgate produce --credential-file ingest.json --topic orders`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if name == "" || len(groups) == 0 {
				return usageErrorf("--name and --groups must not be empty (see %s --help)", cmd.CommandPath())
			}
			if err := ttl.check(); err != nil {
				return err
			}
			if err := opsArg(ops, ocap.ParseClientOps); err != nil {
				return err
			}
			body := map[string]any{"name": name, "groups": groups, "ttl_ms": ttl.ms()}
			if len(topics) > 0 {
				body["topics"] = topics
			}
			if len(ops) > 0 {
				body["ops"] = ops
			}
			return ttl.refused(call(cmd, f, http.MethodPost, "/v1/admin/clients", body))
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "client name (the credential's sub)")
	cmd.Flags().StringSliceVar(&groups, "groups", nil, "groups it may join: names, * (any) or prefix* patterns")
	cmd.Flags().StringSliceVar(&topics, "topics", nil, "topics it may subscribe to: names, * or prefix* patterns (empty: any); with produce, the names it may write to")
	cmd.MarkFlagRequired("name") // each missing one named, with the command's --help
	cmd.MarkFlagRequired("groups")
	cmd.Flags().StringSliceVar(&ops, "ops", nil, "what it allows: consume (join groups, read through them; required) and produce (write through the Kafka listener to the topics named exactly); default consume")
	newTTLFlag(cmd.Flags(), ttl, 30*24*time.Hour, "lifetime of the credential (at least 1s, at most the coordinator's client_credential_ttl_max; 0: its member_token_ttl)")
	return cmd
}

func newAdminRotateKeys(f *adminFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "rotate-keys",
		Short: "Rotate the coordinator's signing keys (gateways learn the new keys on the sync channel)",
		Long: `Rotates the coordinator's signing keys: a new key signs from now on, the
previous one still verifies. The same operation as capgate keys rotate
(POST /v1/admin/keys/rotate).

The second rotation after a token was signed retires its key: what it
signed stops verifying (under capgate dev, the client credential: the
next start replaces it; source credentials.env again).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return call(cmd, f, http.MethodPost, "/v1/admin/keys/rotate", map[string]any{})
		},
	}
}
