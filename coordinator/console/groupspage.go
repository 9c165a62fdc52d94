package console

// Behavior: GET /console/groups?prefix=P&after=A — the groups page reads
// the admin API's name-sorted pages (GET /v1/admin/groups?after=) and
// shows groupsPerPage groups at a time: those whose name starts with P
// (every group when P is empty or absent), after the group named A (from
// the first when A is empty or absent, or sorts before P). A next-page
// link (?after=<last name shown>) follows when more match; a first-page
// link leads back. P and A are names by the admin API's rule
// (ocap.ValidName: 1–255 printable ASCII bytes, no space, no '/'); a
// value breaking it, another query parameter or a repeated one answers
// the error page with 400.

import (
	"errors"
	"net/url"
	"strconv"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/ocap"
)

// groupsQuery is the groups page's query: the name filter and the cursor.
type groupsQuery struct {
	Prefix, After string
}

// parseGroupsQuery reads ?prefix=&after=; a problem names what is refused.
func parseGroupsQuery(args *fasthttp.Args) (groupsQuery, string) {
	var q groupsQuery
	problem := eachQueryArg(args, func(name string, value []byte) string {
		v := string(value)
		if name != "prefix" && name != "after" {
			return "unknown query parameter " + strconv.Quote(name) + ": the groups page takes prefix and after"
		}
		if v != "" && !ocap.ValidName(v) {
			return name + " must be a group name or its beginning: 1–255 printable ASCII characters, no space, no '/', not . or .."
		}
		if name == "prefix" {
			q.Prefix = v
		} else {
			q.After = v
		}
		return ""
	})
	return q, problem
}

// eachQueryArg calls read with each query parameter, each given at most
// once, and returns the first problem: a repeated name, or read's.
func eachQueryArg(args *fasthttp.Args, read func(name string, value []byte) string) string {
	seen := map[string]bool{}
	for key, value := range args.All() {
		name := string(key)
		if seen[name] {
			return "query parameter " + name + " given more than once"
		}
		seen[name] = true
		if problem := read(name, value); problem != "" {
			return problem
		}
	}
	return ""
}

// groupsPage lists up to groupsPerPage groups of q with their
// summaries, and whether more follow. It reads the admin API's pages
// with their summaries (?summaries=true), groupsPerPage+1 groups each —
// one read for a page's groups, where it asked for each group's summary
// in turn (100 reads a page, each summing its group's lag; newuser12) —
// and reads on at their next_after; names are sorted, so the ones
// starting with q.Prefix are one run, and the list stops at the first
// that does not.
func (c *Console) groupsPage(q groupsQuery) (groups []groupSummaryJSON, more bool, err error) {
	cursor := q.After
	if q.Prefix != "" && cursor < q.Prefix {
		// after=P lists names after P: P itself, the first name with
		// its own prefix, is looked up alone.
		var g groupSummaryJSON
		switch err := c.get(groupPath(q.Prefix)+"/summary", &g); {
		case err == nil:
			groups = append(groups, g)
		case errors.Is(err, errNotFound):
		default:
			return nil, false, err
		}
		cursor = q.Prefix
	}
	for {
		path := "/v1/admin/groups?summaries=true&limit=" + strconv.Itoa(min(groupsPerPage+1, c.backend.ListPageMax()))
		if cursor != "" {
			path += "&after=" + url.QueryEscape(cursor)
		}
		var list groupsJSON
		if err := c.get(path, &list); err != nil {
			return nil, false, err
		}
		for _, g := range list.Summaries {
			if !strings.HasPrefix(g.Group, q.Prefix) {
				return groups, false, nil
			}
			if len(groups) == groupsPerPage {
				return groups, true, nil
			}
			groups = append(groups, g)
		}
		if list.NextAfter == "" || len(list.Summaries) == 0 {
			return groups, false, nil
		}
		cursor = list.NextAfter
	}
}

// groupsLinks are the groups page's links: the first page of the filter
// and the next one ("" when there is none).
func groupsLinks(q groupsQuery, names []string, more bool) (first, next string) {
	first = Prefix + "/groups"
	if q.Prefix != "" {
		first += "?" + url.Values{"prefix": {q.Prefix}}.Encode()
	}
	if more {
		v := url.Values{"after": {names[len(names)-1]}}
		if q.Prefix != "" {
			v.Set("prefix", q.Prefix)
		}
		next = Prefix + "/groups?" + v.Encode()
	}
	return first, next
}
