package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"

	"github.com/spf13/cobra"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
)

// groupSummariesMax bounds the groups `admin groups` summarizes (one
// GET /v1/admin/groups/{g}/summary each, summariesInFlight at a time):
// beyond, it lists names only and says so.
const (
	groupSummariesMax  = 1000
	summariesInFlight  = 4
	groupListNamesNote = "(over %d groups: names only; capgate admin group GROUP describes one)\n"
)

// groupList is `admin groups`'s answer: every group's name (all pages
// of GET /v1/admin/groups) and, for up to groupSummariesMax groups, its
// summary (GET /v1/admin/groups/{g}/summary). A group deleted between
// the two (404) has none, and is listed with "-".
type groupList struct {
	Groups    []string                   `json:"groups"`
	Summaries []coordinator.GroupSummary `json:"summaries,omitempty"`
}

// newAdminGroups is `admin groups`: every group with its state, members,
// partitions and lag, as `rpk group list` with what `kafka-consumer-groups
// --describe --state` adds. It listed names only: an operator asked each
// group in turn to learn which had members or lag (newuser11).
func newAdminGroups(f *adminFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "groups",
		Short: "List consumer groups with their state, members, partitions and lag",
		Long: `List consumer groups: each one's state (Empty without live members,
Rebalancing while a partition is handed off, else Stable), live members,
partitions, and lag (the sum over its partitions, as capgate admin group
GROUP shows it per partition; - when Kafka did not answer). JSON and YAML
carry the names ("groups") and each group's summary ("summaries", the
answer of GET /v1/admin/groups/{g}/summary); a group deleted since it was
listed shows "-". Over 1000 groups only the names are listed.`,
		Args: cobra.ExactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			names, err := readAll(cmd.Context(), c, "/v1/admin/groups", func(page json.RawMessage) ([]string, string, error) {
				r, err := decode[coordinator.GroupsResponse](page)
				return r.Groups, r.NextAfter, err
			})
			if err != nil {
				return err
			}
			list := groupList{Groups: names}
			if len(names) <= groupSummariesMax {
				if list.Summaries, err = groupSummaries(cmd.Context(), c, names); err != nil {
					return err
				}
			}
			out, err := json.Marshal(list)
			if err != nil {
				return err
			}
			return f.print(cmd.OutOrStdout(), out, printGroupList)
		},
	}
}

// groupSummaries reads each group's summary, summariesInFlight at a
// time, in the names' order; a group gone since it was listed (404) is
// left out.
func groupSummaries(ctx context.Context, c *adminClient, names []string) ([]coordinator.GroupSummary, error) {
	got := make([]*coordinator.GroupSummary, len(names))
	errs := make([]error, len(names))
	slots := make(chan struct{}, summariesInFlight)
	var wg sync.WaitGroup
	for i, name := range names {
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			var s coordinator.GroupSummary
			err := c.do(ctx, http.MethodGet, groupPath(name)+"/summary", nil, &s)
			if hasCode(err, api.CodeNotFound) {
				return
			}
			got[i], errs[i] = &s, err
		}()
	}
	wg.Wait()
	out := make([]coordinator.GroupSummary, 0, len(names))
	for i, s := range got {
		if errs[i] != nil {
			return nil, errs[i]
		}
		if s != nil {
			out = append(out, *s)
		}
	}
	return out, nil
}

func printGroupList(w io.Writer, raw json.RawMessage) error {
	l, err := decode[groupList](raw)
	if err != nil {
		return err
	}
	if len(l.Groups) > groupSummariesMax {
		rows := make([][]string, len(l.Groups))
		for i, g := range l.Groups {
			rows[i] = []string{cellText(g)}
		}
		if err := printTable(w, []string{"GROUP"}, rows); err != nil {
			return err
		}
		_, err := fmt.Fprintf(w, groupListNamesNote, groupSummariesMax)
		return err
	}
	summaries := make(map[string]coordinator.GroupSummary, len(l.Summaries))
	for _, s := range l.Summaries {
		summaries[s.Group] = s
	}
	rows := make([][]string, len(l.Groups))
	for i, g := range l.Groups {
		s, ok := summaries[g]
		if !ok { // deleted since it was listed, or a coordinator without summaries
			rows[i] = []string{cellText(g), "-", "-", "-", "-"}
			continue
		}
		rows[i] = []string{cellText(g), stateWords(s.Members, s.MovesHeldBack, s.Config.MaxMovesPerSecond, s.Revoking > 0),
			strconv.Itoa(s.Members), strconv.Itoa(s.Partitions), optInt(s.Lag)}
	}
	return printTable(w, []string{"GROUP", "STATE", "MEMBERS", "PARTITIONS", "LAG"}, rows)
}
