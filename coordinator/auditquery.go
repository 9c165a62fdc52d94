package coordinator

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/api"
)

// The bounds of one filter parameter of GET /v1/admin/audit: the values
// it may be given (one occurrence each) and the bytes of each. A request
// is thereby at most 5 × 16 values compared with each kept entry, and the
// ring is audit_entries_max entries.
const (
	auditFilterValuesMax = 16
	auditFilterValueMax  = 256
)

// auditFilter selects audit entries. Within a parameter any value
// matches; across parameters all must; an entry whose action is an
// excluded one, or whose target starts with an excluded prefix, is
// dropped. The zero filter keeps everything.
type auditFilter struct {
	actions        []string // exact
	whos           []string // the whole who, or one of its parts (whoParts)
	targets        []string // prefixes
	excludeActions []string // exact
	excludeTargets []string // prefixes
}

// auditFilterParams are the filter parameters, by name.
var auditFilterParams = map[string]func(*auditFilter) *[]string{
	"action":         func(f *auditFilter) *[]string { return &f.actions },
	"who":            func(f *auditFilter) *[]string { return &f.whos },
	"target":         func(f *auditFilter) *[]string { return &f.targets },
	"exclude_action": func(f *auditFilter) *[]string { return &f.excludeActions },
	"exclude_target": func(f *auditFilter) *[]string { return &f.excludeTargets },
}

// keeps reports whether e passes f.
func (f *auditFilter) keeps(e *AuditEntry) bool {
	if len(f.actions) > 0 && !slices.Contains(f.actions, e.Action) {
		return false
	}
	if len(f.whos) > 0 && !slices.ContainsFunc(f.whos, func(w string) bool { return whoIs(e.Who, w) }) {
		return false
	}
	if len(f.targets) > 0 && !hasAnyPrefix(e.Target, f.targets) {
		return false
	}
	return !slices.Contains(f.excludeActions, e.Action) && !hasAnyPrefix(e.Target, f.excludeTargets)
}

// whoIs reports whether an entry's who is w: the whole of it, or one of
// its two parts when an admin came with both a client certificate and a
// token ("cert:NAME token:HEX", adminWho), so who=token:HEX finds that
// token's actions with or without a certificate.
func whoIs(who, w string) bool {
	if who == w {
		return true
	}
	cert, token, ok := strings.Cut(who, " token:")
	return ok && strings.HasPrefix(cert, "cert:") && (w == cert || w == "token:"+token)
}

func hasAnyPrefix(s string, prefixes []string) bool {
	return slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(s, p) })
}

// auditQuery is GET /v1/admin/audit's parsed query.
type auditQuery struct {
	before uint64
	limit  int
	filter auditFilter
}

// parseAuditQuery reads before and limit (at most once each, in the
// API's one spelling of a number, as every admin page: pageQuery) and
// the filter parameters (once per value, bounded); it returns the 400's
// message for anything else.
func (c *Coordinator) parseAuditQuery(args *fasthttp.Args) (auditQuery, string) {
	q := auditQuery{limit: min(c.cfg.DescribePageMax, 100)}
	seen := map[string]bool{}
	for key, value := range args.All() {
		name := string(key)
		if field, ok := auditFilterParams[name]; ok {
			values := field(&q.filter)
			switch {
			case len(*values) == auditFilterValuesMax:
				return q, fmt.Sprintf("%s: at most %d values", name, auditFilterValuesMax)
			case len(value) == 0:
				return q, name + " must not be empty"
			case len(value) > auditFilterValueMax:
				return q, fmt.Sprintf("%s: a value is at most %d bytes, got %d", name, auditFilterValueMax, len(value))
			}
			*values = append(*values, string(value))
			continue
		}
		if seen[name] {
			return q, "query parameter " + name + " given more than once"
		}
		seen[name] = true
		switch name {
		case "limit":
			n, problem := c.pageLimit(value)
			if problem != "" {
				return q, problem
			}
			q.limit = n
		case "before":
			if len(value) == 0 {
				continue // from the newest, as it always read
			}
			n, ok := api.ParseDecimal(value, math.MaxInt64)
			if !ok || n == 0 {
				return q, "before must be an entry's seq (a decimal integer > 0 without sign or leading zeros)"
			}
			q.before = uint64(n)
		default:
			return q, "unknown query parameter " + strconv.Quote(name) +
				"; allowed: before, limit, action, who, target, exclude_action, exclude_target"
		}
	}
	return q, ""
}
