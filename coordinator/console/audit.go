package console

// Behavior: GET /console/audit — the admin audit log, when the coordinator
// serves GET /v1/admin/audit (issue #13); otherwise 404 and no link in the
// navigation. This file is the whole of it: the log is read as JSON of any
// shape that holds a list of objects (at the top, or under one key), and
// shown as a table of their fields, so the console need not change when
// the audit entry gains a field.

import (
	"encoding/json"
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

func (c *Console) serveAudit(ctx *fasthttp.RequestCtx, s *session, _ []string) {
	if !c.audit {
		writeProblem(ctx, fasthttp.StatusNotFound, "not_found", "this coordinator keeps no audit log")
		return
	}
	var doc any
	if err := c.get(auditPath, &doc); err != nil {
		c.failed(ctx, s, err)
		return
	}
	c.render(ctx, fasthttp.StatusOK, "audit", c.data(s, "audit", "Audit log", tabulate(entries(doc))))
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
