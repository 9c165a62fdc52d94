package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/capgate/capgate/coordinator"
)

// newAdminTopics is `admin topics`: the topics the coordinator knows,
// with their partition counts (GET /v1/admin/topics).
func newAdminTopics(f *adminFlags) *cobra.Command {
	return listAll(f, "topics", "List topics with their partition counts (internal topics left out), as rpk topic list", "/v1/admin/topics", "topics",
		func(page json.RawMessage) ([]coordinator.TopicSummary, string, error) {
			r, err := decode[coordinator.TopicsResponse](page)
			return r.Topics, r.NextAfter, err
		}, printTopics)
}

// newAdminTopic is `admin topic TOPIC` (and `admin topic describe
// TOPIC`, as rpk topic describe): its partitions and where their logs
// start and end (GET /v1/admin/topics/{topic}). There was no way to ask.
func newAdminTopic(f *adminFlags) *cobra.Command {
	describe := func(cmd *cobra.Command, a []string) error {
		if err := topicArg(a[0]); err != nil {
			return err
		}
		return callRender(cmd, f, http.MethodGet, "/v1/admin/topics/"+url.PathEscape(a[0]), nil, printTopicDescription)
	}
	long := `Describe a topic: each partition's earliest and latest offset (Kafka's log
start offset and high watermark; RECORDS is the difference, which
compaction and transaction markers make more than the records it holds),
as the coordinator reads them from Kafka (cached up to offset_cache_ttl). Which groups read it and how far: capgate admin group
GROUP. Kafka's own topics (__*) and capgate's state logs are refused: no
client is granted them.`
	cmd := &cobra.Command{
		Use: "topic TOPIC | topic describe TOPIC", Short: "Describe a topic: its partitions and their earliest and latest offsets",
		Long: long, Args: cobra.ExactArgs(1), RunE: describe,
	}
	cmd.AddCommand(&cobra.Command{
		Use: "describe TOPIC", Short: "Describe a topic, as rpk topic describe -p", Long: long, Args: cobra.ExactArgs(1), RunE: describe,
	})
	return cmd
}

func printTopics(w io.Writer, raw json.RawMessage) error {
	r, err := decode[coordinator.TopicsResponse](raw)
	if err != nil {
		return err
	}
	rows := make([][]string, len(r.Topics))
	for i, t := range r.Topics {
		rows[i] = []string{cellText(t.Topic), strconv.Itoa(int(t.Partitions))}
	}
	return printPage(w, []string{"TOPIC", "PARTITIONS"}, rows, r.NextAfter)
}

func printTopicDescription(w io.Writer, raw json.RawMessage) error {
	d, err := decode[coordinator.TopicDescription](raw)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "TOPIC       %s\nPARTITIONS  %d\n\n", cellText(d.Topic), len(d.Partitions))
	rows := make([][]string, len(d.Partitions))
	for i, p := range d.Partitions {
		records := "-"
		if p.EarliestOffset != nil && p.LatestOffset != nil {
			records = strconv.FormatInt(*p.LatestOffset-*p.EarliestOffset, 10)
		}
		rows[i] = []string{strconv.Itoa(int(p.Partition)), optInt(p.EarliestOffset), optInt(p.LatestOffset), records}
	}
	return printTable(w, []string{"PARTITION", "EARLIEST", "LATEST", "RECORDS"}, rows)
}

// readAll reads every page of a list route (?after= at each answer's
// next_after), items taking a page's items and its next_after.
func readAll[T any](ctx context.Context, c *adminClient, path string, items func(page json.RawMessage) ([]T, string, error)) ([]T, error) {
	all := []T{}
	for after := ""; ; {
		p := path
		if after != "" {
			sep := "?"
			if strings.Contains(path, "?") {
				sep = "&"
			}
			p += sep + "after=" + url.QueryEscape(after)
		}
		var page json.RawMessage
		if err := c.do(ctx, http.MethodGet, p, nil, &page); err != nil {
			return nil, err
		}
		got, next, err := items(page)
		if err != nil {
			return nil, err
		}
		all = append(all, got...)
		if after = next; next == "" {
			return all, nil
		}
	}
}

// listAll reads every page of a list route (?after= at each answer's
// next_after) and prints them as one answer: page's items under key,
// rendered by render. `admin groups` printed the first page and "(more
// after NAME)", a cursor no flag took (newuser5); rpk lists everything.
func listAll[T any](f *adminFlags, use, short, path, key string, items func(page json.RawMessage) ([]T, string, error), render renderer) *cobra.Command {
	return &cobra.Command{
		Use: use, Short: short, Args: cobra.ExactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			all, err := readAll(cmd.Context(), c, path, items)
			if err != nil {
				return err
			}
			out, err := json.Marshal(map[string][]T{key: all})
			if err != nil {
				return err
			}
			return f.print(cmd.OutOrStdout(), out, render)
		},
	}
}
