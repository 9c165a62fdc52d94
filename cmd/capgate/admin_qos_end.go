package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
)

// qosSelectorFlags are the selector flags of qos and qos end.
type qosSelectorFlags struct {
	group, topic, holder, jti string
	partition                 int32
}

func (s *qosSelectorFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&s.group, "group", "", "selector: group")
	fl.StringVar(&s.topic, "topic", "", "selector: topic")
	fl.Int32Var(&s.partition, "partition", 0, "selector: partition")
	fl.StringVar(&s.holder, "holder", "", "selector: holder — a capability's sub (member id, grant or lease holder), a client credential's jti (never its --name), oauth:<client_id> for an OAuth client's tokens")
	fl.StringVar(&s.jti, "jti", "", "selector: capability id")
}

// selector is the selector the flags name; a usage error when none.
func (s *qosSelectorFlags) selector(cmd *cobra.Command) (api.QoSSelector, error) {
	sel := api.QoSSelector{Group: s.group, Topic: s.topic, Holder: s.holder, JTI: s.jti}
	if cmd.Flags().Changed("partition") {
		sel.Partition = &s.partition
	}
	if sel == (api.QoSSelector{}) {
		return sel, errNoSelector
	}
	return sel, nil
}

// newAdminQoSEnd is `admin qos end`: the API has no delete, an override
// lasts until its until, and a PUT of the same id with ttl_ms 1 sets its
// until to now — the coordinator and every gateway drop it at once
// (an override is in force while now < until). The override is looked
// up first, so naming one that is not in force (a typo in the selector)
// is an error, never a new override.
func newAdminQoSEnd(f *adminFlags) *cobra.Command {
	var sel qosSelectorFlags
	var id string
	cmd := &cobra.Command{
		Use:   "end [--group G] [--topic T] [--partition P] [--holder H] [--jti J] | end --id ID",
		Short: "End a QoS override now, on the coordinator and every gateway",
		Long: `Ends the QoS override of a selector now: its byte rate, log level and
monitor tag stop applying on every gateway at once, and qos list no longer
shows it. Name it with the selector flags it was set with (exactly those),
or with --id (qos list's ID). An override not in force is an error.`,
		Example: `  capgate admin qos --group readme --max-bytes-per-sec 4000
  capgate admin qos end --group readme`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var selector api.QoSSelector
			if id == "" {
				var err error
				if selector, err = sel.selector(cmd); err != nil {
					return usageErrorf("%v, or --id (capgate admin qos list shows them)", err)
				}
			} else if s, _ := sel.selector(cmd); s != (api.QoSSelector{}) {
				return usageErrorf("--id names the override: give it without selector flags")
			}
			c, err := f.client()
			if err != nil {
				return err
			}
			var list coordinator.QoSListResponse
			if err := c.do(cmd.Context(), http.MethodGet, "/v1/admin/qos", nil, &list); err != nil {
				return err
			}
			var found *api.QoSOverride
			for i, o := range list.Overrides {
				if (id != "" && o.ID == id) || (id == "" && reflect.DeepEqual(o.Selector, selector)) {
					found = &list.Overrides[i]
				}
			}
			if found == nil {
				return fmt.Errorf("no QoS override in force for %s: capgate admin qos list shows those in force", qosWanted(id, selector))
			}
			var out json.RawMessage
			body := map[string]any{"id": found.ID, "selector": found.Selector, "ttl_ms": 1}
			if err := c.do(cmd.Context(), http.MethodPut, "/v1/admin/qos", body, &out); err != nil {
				return err
			}
			return f.print(cmd.OutOrStdout(), out, printQoSOverride)
		},
	}
	sel.register(cmd.Flags())
	cmd.Flags().StringVar(&id, "id", "", "the override's id (qos list's ID), instead of its selector")
	return cmd
}

// qosWanted says which override qos end looked for.
func qosWanted(id string, s api.QoSSelector) string {
	if id != "" {
		return "id " + id
	}
	raw, _ := json.Marshal(s)
	return "selector " + string(raw)
}

// qosClears checks qos's --clear values against what the same command
// sets, as the coordinator would (400 field=clear), but as a usage error
// before anything is sent: each value once, log_level or monitor (the
// flag's spelling, log-level, taken too), and not a field --log-level or
// --monitor also sets.
func qosClears(values []string, level, monitor string) ([]string, error) {
	var out []string
	for _, v := range values {
		field := strings.ReplaceAll(strings.TrimSpace(v), "-", "_")
		switch field {
		case "log_level", "monitor":
		default:
			return nil, usageErrorf("--clear %q: the fields an override can lose are log_level and monitor (--max-bytes-per-sec 0 removes a rate)", v)
		}
		if slices.Contains(out, field) {
			continue
		}
		if set := map[string]string{"log_level": level, "monitor": monitor}[field]; set != "" {
			return nil, usageErrorf("--clear %s and --%s %s in one command: give one of them", field, strings.ReplaceAll(field, "_", "-"), set)
		}
		out = append(out, field)
	}
	return out, nil
}
