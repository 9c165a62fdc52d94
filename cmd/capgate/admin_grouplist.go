package main

import (
	"context"
	"encoding/json"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
)

// groupList is `admin groups`'s answer: every group's name and its
// summary, from every page of GET /v1/admin/groups?summaries=true (one
// call per 1,000 groups, the names and summaries read together). A
// coordinator older than the summaries lists names only: every group is
// then listed with "-".
type groupList struct {
	Groups    []string                   `json:"groups"`
	Summaries []coordinator.GroupSummary `json:"summaries,omitempty"`
}

// newAdminGroups is `admin groups`: every group with its state, members,
// partitions and lag, as `rpk group list` with what `kafka-consumer-groups
// --describe --state` adds. It listed names only: an operator asked each
// group in turn to learn which had members or lag (newuser11); then it
// asked the coordinator once per group, 4 at a time, and gave up past
// 1,000 groups (newuser12).
func newAdminGroups(f *adminFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "groups",
		Short: "List consumer groups with their state, members, partitions and lag",
		Long: `List consumer groups: each one's state (Empty without live members,
Rebalancing while a partition is handed off, else Stable), live members,
partitions, and lag (the sum over its partitions, as capgate admin group
GROUP shows it per partition; - when Kafka did not answer, or the group
has more than the coordinator's describe_lag_max partitions). JSON and
YAML carry the names ("groups") and each group's summary ("summaries":
GET /v1/admin/groups?summaries=true, one call per 1000 groups).`,
		Args: cobra.ExactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			list, err := readGroupList(cmd.Context(), c)
			if err != nil {
				return err
			}
			out, err := json.Marshal(list)
			if err != nil {
				return err
			}
			return f.print(cmd.OutOrStdout(), out, printGroupList)
		},
	}
}

// readGroupList reads every page of the groups with their summaries; a
// coordinator that refuses the summaries parameter (400: one from
// before it) is asked for the names alone.
func readGroupList(ctx context.Context, c *adminClient) (groupList, error) {
	var list groupList
	pages, err := readAll(ctx, c, "/v1/admin/groups?summaries=true", func(page json.RawMessage) ([]coordinator.GroupsResponse, string, error) {
		r, err := decode[coordinator.GroupsResponse](page)
		return []coordinator.GroupsResponse{r}, r.NextAfter, err
	})
	if hasCode(err, api.CodeBadRequest) {
		list.Groups, err = readAll(ctx, c, "/v1/admin/groups", func(page json.RawMessage) ([]string, string, error) {
			r, err := decode[coordinator.GroupsResponse](page)
			return r.Groups, r.NextAfter, err
		})
		return list, err
	}
	if err != nil {
		return list, err
	}
	list.Groups = []string{}
	for _, p := range pages {
		list.Groups = append(list.Groups, p.Groups...)
		list.Summaries = append(list.Summaries, p.Summaries...)
	}
	return list, nil
}

func printGroupList(w io.Writer, raw json.RawMessage) error {
	l, err := decode[groupList](raw)
	if err != nil {
		return err
	}
	summaries := make(map[string]coordinator.GroupSummary, len(l.Summaries))
	for _, s := range l.Summaries {
		summaries[s.Group] = s
	}
	rows := make([][]string, len(l.Groups))
	for i, g := range l.Groups {
		s, ok := summaries[g]
		if !ok { // a coordinator without summaries
			rows[i] = []string{cellText(g), "-", "-", "-", "-"}
			continue
		}
		rows[i] = []string{cellText(g), stateWords(s.Members, s.MovesHeldBack, s.Config.MaxMovesPerSecond, s.Revoking > 0),
			strconv.Itoa(s.Members), strconv.Itoa(s.Partitions), optInt(s.Lag)}
	}
	return printTable(w, []string{"GROUP", "STATE", "MEMBERS", "PARTITIONS", "LAG"}, rows)
}
