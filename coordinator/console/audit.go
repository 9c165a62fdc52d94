package console

// Behavior: GET /console/audit — the admin audit log, when the coordinator
// serves GET /v1/admin/audit (issue #13); otherwise 404 and no link in the
// navigation. A filter form (action, who, target prefix, a hidden action,
// a hidden target prefix: ?action=&who=&target=&exclude_action=
// &exclude_target=, each once) is the admin API's
// filter, sent on as it is (its refusals are the page's 400; a URL with
// empty fields, as the form submits them, is 303 to the same without
// them); "older
// entries" pages with before= (its next_before). Without one, a busy
// admin (capgate produce mints a capability per partition it writes)
// buried an operator's actions past the page's 100 entries. This file is the whole of it: the log is read as JSON of any
// shape that holds a list of objects (at the top, or under one key), and
// shown as a table of their fields, so the console need not change when
// the audit entry gains a field.

import (
	"encoding/json"
	"net/url"
	"slices"
	"sort"
	"strconv"

	"github.com/valyala/fasthttp"
)

const (
	auditPath       = "/v1/admin/audit"
	maxAuditRows    = 500
	maxAuditColumns = 10
)

type auditTable struct {
	Columns []string
	Rows    [][]string
}

// auditFilter is the Audit page's filter form: each field one value of
// the admin API's filter parameter of the same name (an empty one is
// not sent). Before pages to older entries.
type auditFilter struct {
	Action, Who, Target, ExcludeAction, ExcludeTarget string
	Before                                            string
}

// auditField is one field of the form, by the admin API's name.
type auditField struct {
	name  string
	value *string
}

func (f *auditFilter) fields() []auditField {
	return []auditField{{"action", &f.Action}, {"who", &f.Who}, {"target", &f.Target}, {"exclude_action", &f.ExcludeAction}, {"exclude_target", &f.ExcludeTarget}, {"before", &f.Before}}
}

// parseAuditFilter reads the page's query: the filter fields, each at
// most once; anything else is a problem to show (400).
func parseAuditFilter(args *fasthttp.Args) (auditFilter, string) {
	var f auditFilter
	known := map[string]*string{}
	for _, fd := range f.fields() {
		known[fd.name] = fd.value
	}
	seen := map[string]bool{}
	for key, value := range args.All() {
		name := string(key)
		dst, ok := known[name]
		if !ok {
			return f, "unknown filter " + strconv.Quote(name) + "; the Audit page filters by action, who, target, exclude_action, exclude_target (and pages with before)"
		}
		if seen[name] {
			return f, name + " given more than once"
		}
		seen[name] = true
		*dst = string(value)
	}
	return f, ""
}

// query is the admin API's query for f (empty fields left out).
func (f *auditFilter) query(before string) string {
	q := url.Values{}
	for _, fd := range f.fields() {
		if *fd.value != "" && fd.name != "before" {
			q.Set(fd.name, *fd.value)
		}
	}
	if before != "" {
		q.Set("before", before)
	}
	return q.Encode()
}

func (c *Console) serveAudit(ctx *fasthttp.RequestCtx, s *session, _ []string) {
	if !c.audit {
		writeProblem(ctx, fasthttp.StatusNotFound, "not_found", "this coordinator keeps no audit log")
		return
	}
	f, problem := parseAuditFilter(ctx.QueryArgs())
	if problem != "" {
		c.render(ctx, fasthttp.StatusBadRequest, "problem", c.data(s, "audit", "Problem", problem))
		return
	}
	if withoutEmptyFields(ctx, Prefix+"/audit") {
		return
	}
	path := auditPath
	if q := f.query(f.Before); q != "" {
		path += "?" + q
	}
	var doc any
	if err := c.get(path, &doc); err != nil {
		c.failed(ctx, s, err)
		return
	}
	body := struct {
		Filter   auditFilter
		Filtered bool
		Table    auditTable
		Older    string
	}{Filter: f, Filtered: f.query("") != "", Table: tabulate(entries(doc))}
	if m, ok := doc.(map[string]any); ok {
		if next, ok := m["next_before"].(float64); ok && next > 0 {
			body.Older = Prefix + "/audit?" + f.query(strconv.FormatFloat(next, 'f', -1, 64))
		}
	}
	c.render(ctx, fasthttp.StatusOK, "audit", c.data(s, "audit", "Audit log", body))
}

// entries finds the list of entries: the document itself, or the first
// list of objects under a key (keys in order).
func entries(doc any) []map[string]any {
	switch v := doc.(type) {
	case []any:
		var out []map[string]any
		for _, e := range v {
			if m, ok := e.(map[string]any); ok {
				out = append(out, m)
			}
		}
		return out
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if list, ok := v[k].([]any); ok {
				return entries(list)
			}
		}
	}
	return nil
}

// tabulate makes a table of up to maxAuditRows entries; the columns are
// the fields, time-like and who/what first.
func tabulate(list []map[string]any) auditTable {
	list = list[:min(len(list), maxAuditRows)]
	seen := map[string]bool{}
	var cols []string
	for _, e := range list {
		for k := range e {
			if !seen[k] {
				seen[k] = true
				cols = append(cols, k)
			}
		}
	}
	first := []string{"at", "time", "who", "principal", "action", "what", "target", "details", "reason", "result"}
	rank := func(k string) int {
		if i := slices.Index(first, k); i >= 0 {
			return i
		}
		return len(first)
	}
	sort.Slice(cols, func(i, j int) bool {
		if ri, rj := rank(cols[i]), rank(cols[j]); ri != rj {
			return ri < rj
		}
		return cols[i] < cols[j]
	})
	cols = cols[:min(len(cols), maxAuditColumns)]
	t := auditTable{Columns: cols}
	for _, e := range list {
		row := make([]string, len(cols))
		for i, k := range cols {
			row[i] = cell(e[k])
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

func cell(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case float64:
		// Plain digits: audit seqs are unix microseconds (~1.8e15, exact
		// in a float64 below 2^53), which fmt would print in exponent form.
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	b, _ := json.Marshal(v)
	return string(b)
}
