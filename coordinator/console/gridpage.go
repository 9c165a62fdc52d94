package console

// Behavior: the group page's grid is paged — GET /console/groups/{g}
// (and its /live fragment) ?from=N&only=moving shows at most
// gridPageCells partitions: the group's partitions in the admin API's
// order (topic, partition), only those not owned (revoking or unowned)
// with only=moving, from the N-th of them (0 when absent). The counts
// above the grid are the whole group's. Links lead to the next and the
// first page and switch the filter. N is a count by the API's one
// spelling of a number; another query parameter, a repeated one or
// another value of only answers 400 (the page: the Problem page; the
// fragment: the JSON error body).
//
// Without it the grid was every partition of the group: at the limits'
// default (describe_page_max 10,000) 9 MB of HTML rendered in 0.66 s of
// the coordinator's CPU at every re-read of an open page (every 5 s and
// after each handoff event), and 3–7 s of the browser's main thread to
// swap it in — a page that never answered a click.

import (
	"math"
	"net/url"
	"strconv"

	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/api"
)

// gridPageCells is how many partitions the group page's grid shows at
// once; membersShown how many rows its members table has (then the
// count of the others, and where to read them all). A group may have
// members_per_group (10,000) members: as many rows, two buttons each,
// at every re-read.
const (
	gridPageCells = 500
	membersShown  = 500
)

// gridQuery is the group page's query.
type gridQuery struct {
	From   int  // index of the first partition shown, among those the filter keeps
	Moving bool // only partitions not owned: revoking or unowned
}

// parseGridQuery reads ?from=&only=; a problem names what is refused.
func parseGridQuery(args *fasthttp.Args) (gridQuery, string) {
	var q gridQuery
	problem := eachQueryArg(args, func(name string, value []byte) string {
		switch name {
		case "from":
			n, ok := api.ParseDecimal(value, math.MaxInt32)
			if !ok {
				return "from must be the index of a partition in the grid: " + api.DecimalRule
			}
			q.From = int(n)
		case "only":
			if string(value) != "moving" {
				return "only takes moving (the partitions not owned: revoking or unowned), got " + strconv.Quote(string(value))
			}
			q.Moving = true
		default:
			return "unknown query parameter " + strconv.Quote(name) + ": the group page takes from and only"
		}
		return ""
	})
	return q, problem
}

// gridWindow is what the grid shows of the group: partitions From+1 to
// From+Shown of Total (those the filter keeps), and its links.
type gridWindow struct {
	Moving             bool
	Cut                bool // the group has partitions past Total, which the console does not read (describe_page_max)
	From, Shown, Total int
	First, Next        string // "" when there is none
	Toggle             string // the same page with the other filter
	after              string // the partition before the page ("topic/N"; "" for the first), unfiltered pages only
}

// window keeps the cells of q's page in v's topics and says which, and
// the first membersShown members.
func (v *groupView) window(q gridQuery) {
	v.MembersTotal = len(v.Members)
	v.Members = v.Members[:min(len(v.Members), membersShown)]
	w := gridWindow{Moving: q.Moving, From: q.From, Cut: v.partitionsCut}
	var kept []topicView
	for _, t := range v.Topics {
		var cells []cellView
		for _, c := range t.Cells {
			if q.Moving && c.State == "owned" {
				continue
			}
			if w.Total >= q.From && w.Total < q.From+gridPageCells {
				cells = append(cells, c)
			}
			if w.Total == q.From-1 && !q.Moving {
				w.after = c.Topic + "/" + strconv.Itoa(int(c.Partition))
			}
			w.Total++
		}
		if len(cells) > 0 {
			kept = append(kept, topicView{Topic: t.Topic, Cells: cells})
			w.Shown += len(cells)
		}
	}
	v.Topics = kept
	link := func(from int, moving bool) string {
		q := url.Values{}
		if from > 0 {
			q.Set("from", strconv.Itoa(from))
		}
		if moving {
			q.Set("only", "moving")
		}
		path := Prefix + "/groups/" + url.PathEscape(v.Name)
		if len(q) > 0 {
			path += "?" + q.Encode()
		}
		return path
	}
	if q.From > 0 {
		w.First = link(0, q.Moving)
	}
	if q.From+gridPageCells < w.Total {
		w.Next = link(q.From+gridPageCells, q.Moving)
	}
	w.Toggle = link(0, !q.Moving)
	v.Grid = w
}

// pageLag fills the lag of the page's cells when the group's describe
// had none: the admin API looks lag up only for a describe of at most
// describe_lag_max (1,000) partitions, so a bigger group showed "–" in
// every cell. The page's own partitions are read again as one describe
// page (limit and partitions_after: at most gridPageCells), which has
// it. Not for the filtered grid (its cells are not one run).
func (c *Console) pageLag(v *groupView) {
	if v.Grid.Moving || v.Grid.Shown == 0 {
		return
	}
	for _, t := range v.Topics {
		for _, cell := range t.Cells {
			if cell.Lag != "–" {
				return // the describe had lag
			}
		}
	}
	q := url.Values{"limit": {strconv.Itoa(v.Grid.Shown)}}
	if v.Grid.after != "" {
		q.Set("partitions_after", v.Grid.after)
	}
	var page groupJSON
	if err := c.get(groupPath(v.Name)+"?"+q.Encode(), &page); err != nil {
		return // the grid without it
	}
	lags := make(map[string]int64, len(page.Partitions))
	for _, p := range page.Partitions {
		if p.Lag != nil {
			lags[p.Topic+"/"+strconv.Itoa(int(p.Partition))] = *p.Lag
		}
	}
	for ti := range v.Topics {
		for ci := range v.Topics[ti].Cells {
			cell := &v.Topics[ti].Cells[ci]
			if lag, ok := lags[cell.Topic+"/"+strconv.Itoa(int(cell.Partition))]; ok {
				cell.Lag = strconv.FormatInt(lag, 10)
			}
		}
	}
}
