package console

// Behavior: the pages (GET, a session; without one → 303 to the login
// page). Each reads the admin API in-process and renders server-side:
//   /console/groups             the groups, 100 a page, filtered by name
//                               prefix (groupspage.go; ?prefix= empty
//                               is 303 to the bare URL): members,
//                               partitions by state, lag (each group's
//                               summary, GET /v1/admin/groups/{g}/summary)
//   /console/groups/{g}         members, the partition grid coloured by
//                               holder (each cell with the QoS overrides
//                               on it; 1,000 a page, or only those not
//                               owned: gridpage.go), config, the group's
//                               live timeline
//   /console/groups/{g}/live    the members and grid alone (HTML fragment
//                               the page swaps in when the timeline moves)
//   /console/timeline           the live timeline of every group
//   /console/gateways           acked sequence, lag and silence per gateway
//   /console/overrides          QoS overrides (re-read every 5 s); set one,
//                               end one; deny a capability
// An unknown group answers 404 with the page.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/coordinator/timeline"
)

const (
	groupsPerPage = 100 // groups described on one groups page (groupspage.go)
	recentEvents  = 200 // timeline lines rendered with a page
	holderColours = 10  // c0 … c9 in console.css
	pollGroups    = 5000
	pollGateways  = 1000 // silence is the point of the page
)

// pageData is what every page template gets.
type pageData struct {
	Title  string
	Nav    string
	CSRF   string
	Who    string // the session's principal
	Audit  bool
	Stream string // query of the page's event stream; "" = not live
	Poll   int    // ms between re-reads of the page's main part; 0 = never
	// Refresh is the seconds after which the browser reloads the page
	// (a meta refresh: the Standby page); 0 = never.
	Refresh int
	Last    uint64 // id of the newest event rendered with the page
	Group   string
	Body    any
	// Started is when this coordinator began serving (its start, or its
	// takeover): what the Timeline and Audit pages hold begins then.
	Started time.Time
	// Peers are the other replicas' origins, space-separated
	// (Console.SetPeers): the page links to them when this one stops.
	Peers string
}

func (c *Console) data(s *session, nav, title string, body any) pageData {
	return pageData{Title: title, Nav: nav, CSRF: s.csrf, Who: s.principal, Audit: c.audit, Body: body, Started: c.started, Peers: c.peers}
}

// render executes page name with its layout. Templates write into a
// buffer first, so a failing template never sends half a page.
func (c *Console) render(ctx *fasthttp.RequestCtx, status int, name string, d pageData) {
	var buf bytes.Buffer
	if err := c.pages[name].ExecuteTemplate(&buf, name, d); err != nil {
		c.log.Error("console: render " + name + ": " + err.Error())
		writeProblem(ctx, fasthttp.StatusInternalServerError, "internal", "render failed")
		return
	}
	ctx.SetStatusCode(status)
	ctx.SetContentType("text/html; charset=utf-8")
	ctx.SetBody(buf.Bytes())
}

func (c *Console) failed(ctx *fasthttp.RequestCtx, s *session, err error) {
	status := fasthttp.StatusServiceUnavailable
	switch {
	case errors.Is(err, errNotFound):
		status = fasthttp.StatusNotFound
	case errors.Is(err, errBadRequest):
		status = fasthttp.StatusBadRequest
	}
	c.render(ctx, status, "problem", c.data(s, "", "Problem", err.Error()))
}

// withoutEmptyFields answers a page's URL that carries empty query
// fields with 303 to the same page without them, and reports whether it
// did. A GET form submits every field, so filtering the Audit page by
// one gave ?action=&who=&target=orders/&exclude_action= — the URL an
// operator copies to share, and the one the page re-reads. The fields
// kept are escaped as they came and in their order; path is a console
// path (a constant), so the Location cannot leave the console.
func withoutEmptyFields(ctx *fasthttp.RequestCtx, path string) bool {
	var kept []string
	empty := false
	for key, value := range ctx.QueryArgs().All() {
		if len(value) == 0 {
			empty = true
			continue
		}
		kept = append(kept, url.QueryEscape(string(key))+"="+url.QueryEscape(string(value)))
	}
	if !empty {
		return false
	}
	if len(kept) > 0 {
		path += "?" + strings.Join(kept, "&")
	}
	seeOther(ctx, path)
	return true
}

// groupRow is one line of the groups page.
type groupRow struct {
	Name                     string
	Members, Partitions      int
	Owned, Revoking, Unowned int
	Lag                      string
	MaxMoves                 string
}

func (c *Console) serveGroups(ctx *fasthttp.RequestCtx, s *session, _ []string) {
	q, problem := parseGroupsQuery(ctx.QueryArgs())
	if problem != "" {
		c.render(ctx, fasthttp.StatusBadRequest, "problem", c.data(s, "groups", "Problem", problem))
		return
	}
	if withoutEmptyFields(ctx, Prefix+"/groups") {
		return
	}
	groups, more, err := c.groupsPage(q)
	if err != nil {
		c.failed(ctx, s, err)
		return
	}
	rows := make([]groupRow, 0, len(groups))
	names := make([]string, 0, len(groups))
	for _, g := range groups {
		// The summary, not a describe: the page described each of its
		// 100 groups whole at every re-read (100 groups of 1,000
		// partitions: 18 MB of JSON, 0.64 s of the coordinator's CPU).
		name := g.Group
		names = append(names, name)
		lag := "–"
		if g.Lag != nil {
			lag = strconv.FormatInt(*g.Lag, 10)
		}
		rows = append(rows, groupRow{
			Name: name, Members: g.Members, Partitions: g.Partitions,
			Owned: g.Owned, Revoking: g.Revoking, Unowned: g.Unowned, Lag: lag, MaxMoves: movesText(g.Config.MaxMovesPerSecond),
		})
	}
	first, next := groupsLinks(q, names, more)
	body := struct {
		Rows                []groupRow
		Prefix, After       string
		FirstPage, NextPage string
	}{rows, q.Prefix, q.After, first, next}
	d := c.data(s, "groups", "Groups", body)
	d.Poll = pollGroups
	c.render(ctx, fasthttp.StatusOK, "groups", d)
}

// groupView is the group page: members with their colours, the grid per
// topic, config, and counts.
type groupView struct {
	Name                     string
	Assignor                 string
	MaxMoves                 int
	HandoffTimeout           string
	SessionTimeout           string
	OffsetReset              string
	Members                  []memberView
	Topics                   []topicView
	Owned, Revoking, Unowned int
	Lag                      string
	Events                   []timeline.Event
	Grid                     gridWindow // which partitions the grid shows (gridpage.go)
	MembersTotal             int        // Members holds the first membersShown of them
	MovesHeldBack            int        // moves max_moves_per_second holds back now
	partitionsCut            bool       // the admin API's answer stops before the group's last partition
}

// memberView is one member. Credential is the id of what opened it —
// what "Deny credential" (POST /v1/admin/capabilities/{id}/revoke) names
// to stop a consumer that rejoins after a revoke — and CredentialName its
// subject (a client credential's name, an identity's subject).
type memberView struct {
	ID, ClientID, InstanceID string
	Credential               string
	CredentialName           string
	Partitions               int
	Contact                  string
	Colour                   string
}

type topicView struct {
	Topic string
	Cells []cellView
}

type cellView struct {
	Topic       string
	Partition   int32
	Epoch       uint64
	State       string
	Holder      string
	HolderEpoch uint64
	Colour      string
	Target      string
	Safe        bool
	Released    bool
	Committed   string
	Lag         string
	Lease       string
	QoS         string // the QoS overrides on it: "throttled 2000 B/s · log debug"
}

func newGroupView(g groupJSON, now time.Time) groupView {
	v := groupView{
		Name: g.Group, Assignor: g.Config.Assignor, MaxMoves: g.Config.MaxMovesPerSecond, MovesHeldBack: g.MovesHeldBack,
		partitionsCut:  g.NextPartitionsAfter != "",
		HandoffTimeout: msText(g.Config.HandoffTimeoutMs), SessionTimeout: msText(g.Config.SessionTimeoutMs),
		OffsetReset: g.Config.OffsetReset,
	}
	colour := make(map[string]string, len(g.Members))
	for i, m := range g.Members {
		colour[m.ID] = "c" + strconv.Itoa(i%holderColours)
		mv := memberView{
			ID: m.ID, ClientID: m.ClientID, InstanceID: m.InstanceID, Partitions: m.Partitions,
			Contact: since(now, parseTime(m.LastContact)), Colour: colour[m.ID],
		}
		if m.Credential != nil {
			mv.Credential, mv.CredentialName = m.Credential.ID, m.Credential.Subject
		}
		v.Members = append(v.Members, mv)
	}
	var lag int64
	lagKnown := false
	for _, p := range g.Partitions {
		cell := cellView{
			Topic: p.Topic, Partition: p.Partition, Epoch: p.Epoch, State: p.State,
			Holder: p.Owner, HolderEpoch: p.OwnerEpoch, Target: p.Target,
			Safe: p.GatewaysSafe, Released: p.Released, Committed: "–", Lag: "–",
		}
		cell.Colour = holderColour(colour, p.Owner, p.OwnerOutside)
		if p.Committed != nil {
			cell.Committed = strconv.FormatInt(*p.Committed, 10)
		}
		if p.Lag != nil {
			cell.Lag = strconv.FormatInt(*p.Lag, 10)
			lag, lagKnown = lag+*p.Lag, true
		}
		if p.Lease != nil {
			cell.Lease = p.Lease.Holder
		}
		switch p.State {
		case "owned":
			v.Owned++
		case "revoking":
			v.Revoking++
		default:
			v.Unowned++
		}
		if n := len(v.Topics); n == 0 || v.Topics[n-1].Topic != p.Topic {
			v.Topics = append(v.Topics, topicView{Topic: p.Topic})
		}
		t := &v.Topics[len(v.Topics)-1]
		t.Cells = append(t.Cells, cell)
	}
	v.Lag = "–"
	if lagKnown {
		v.Lag = strconv.FormatInt(lag, 10)
	}
	return v
}

func holderColour(colour map[string]string, holder string, outside bool) string {
	switch {
	case holder == "":
		return "cn"
	case outside:
		return "cx"
	case colour[holder] != "":
		return colour[holder]
	}
	return "cg" // a holder that already left the group
}

func (c *Console) groupView(name string, gq gridQuery) (groupView, error) {
	var g groupJSON
	if err := c.get(groupPath(name), &g); err != nil {
		return groupView{}, err
	}
	v := newGroupView(g, c.now())
	v.window(gq) // the counts above are the group's; the grid one page of it
	c.pageLag(&v)
	var q qosJSON
	if err := c.get("/v1/admin/qos", &q); err == nil { // the grid without them rather than no grid
		v.markQoS(q)
	}
	return v, nil
}

// markQoS says on each cell what QoS overrides apply to its partition
// as it is held now: a throttle set from the Overrides page or the CLI
// was nowhere on the group's page, where an operator looks for why a
// partition lags. A selector naming a capability id (jti) is left out:
// which capability a holder reads with is not on the page.
//
// The overrides are indexed by the selector fields they name (qosKey),
// so each cell looks up its 8 combinations instead of reading every
// override: at the limits (qos_overrides 10,000, a grid of 10,000
// partitions) the scan of each against each was 2.5 s of the
// coordinator's CPU at every 5 s re-read of an open group page. A cell
// says at most maxCellQoS of the overrides on it (the first, in the
// API's order) and how many more: overrides with one selector and
// different ids each matched every cell, a page of gigabytes.
func (v *groupView) markQoS(q qosJSON) {
	index := map[qosKey][]int{}
	for i, o := range q.Overrides {
		s := o.Selector
		if s.JTI != "" || (s.Group != "" && s.Group != v.Name) {
			continue
		}
		var k qosKey
		if s.Topic != "" {
			k.names, k.topic = k.names|qosTopic, s.Topic
		}
		if s.Partition != nil {
			k.names, k.partition = k.names|qosPartition, *s.Partition
		}
		if s.Holder != "" {
			k.names, k.holder = k.names|qosHolder, s.Holder
		}
		index[k] = append(index[k], i)
	}
	if len(index) == 0 {
		return
	}
	var hits []int
	var more int
	for ti := range v.Topics {
		for ci := range v.Topics[ti].Cells {
			cell := &v.Topics[ti].Cells[ci]
			hits, more = hits[:0], 0
			for names := range qosNames(8) {
				k := qosKey{names: names}
				if names&qosTopic != 0 {
					k.topic = cell.Topic
				}
				if names&qosPartition != 0 {
					k.partition = cell.Partition
				}
				if names&qosHolder != 0 {
					if cell.Holder == "" {
						continue
					}
					k.holder = cell.Holder
				}
				bucket := index[k]
				more += len(bucket)
				hits = append(hits, bucket[:min(len(bucket), maxCellQoS)]...)
			}
			slices.Sort(hits) // the API's order, whatever the selectors
			hits = hits[:min(len(hits), maxCellQoS)]
			more -= len(hits)
			var rates, levels, monitors []string // in this order, whatever the overrides' ids
			for _, i := range hits {
				o := q.Overrides[i]
				if o.MaxBytesPerSec > 0 {
					rates = append(rates, "throttled "+strconv.FormatInt(o.MaxBytesPerSec, 10)+" B/s")
				}
				if o.LogLevel != "" {
					levels = append(levels, "log "+o.LogLevel)
				}
				if o.Monitor != "" {
					monitors = append(monitors, "monitor "+o.Monitor)
				}
			}
			parts := slices.Concat(rates, levels, monitors)
			if more > 0 {
				parts = append(parts, strconv.Itoa(more)+" more overrides")
			}
			cell.QoS = strings.Join(parts, " · ")
		}
	}
}

// maxCellQoS is how many overrides a grid cell names (then "N more").
const maxCellQoS = 4

// qosNames is which selector fields a QoS override names, beside its
// group: a bit each.
type qosNames uint8

const (
	qosTopic qosNames = 1 << iota
	qosPartition
	qosHolder
)

// qosKey is an override's selector fields, beside its group, for
// qosKey is an override's selector fields, beside its group, for
// markQoS's index: those it names (names) and their values.
type qosKey struct {
	names     qosNames
	topic     string
	partition int32
	holder    string
}

func (c *Console) serveGroup(ctx *fasthttp.RequestCtx, s *session, params []string) {
	name := params[0]
	gq, problem := parseGridQuery(ctx.QueryArgs())
	if problem != "" {
		c.render(ctx, fasthttp.StatusBadRequest, "problem", c.data(s, "groups", "Problem", problem))
		return
	}
	last := c.feed.Last() // before reading: the stream resumes from here, so nothing falls between
	v, err := c.groupView(name, gq)
	if err != nil {
		c.failed(ctx, s, err)
		return
	}
	v.Events = newestFirst(c.feed.Recent(recentEvents, func(e *timeline.Event) bool { return e.Of(name) }))
	d := c.data(s, "groups", "Group "+name, v)
	d.Stream, d.Last, d.Group = "group="+queryEscape(name), last, name
	c.render(ctx, fasthttp.StatusOK, "group", d)
}

func (c *Console) serveGroupLive(ctx *fasthttp.RequestCtx, s *session, params []string) {
	gq, problem := parseGridQuery(ctx.QueryArgs())
	if problem != "" {
		writeProblem(ctx, fasthttp.StatusBadRequest, "bad_request", problem)
		return
	}
	v, err := c.groupView(params[0], gq)
	if err != nil {
		status := fasthttp.StatusServiceUnavailable
		if errors.Is(err, errNotFound) {
			status = fasthttp.StatusNotFound
		}
		writeProblem(ctx, status, "unavailable", err.Error())
		return
	}
	d := c.data(s, "groups", "", v)
	c.render(ctx, fasthttp.StatusOK, "live", d)
}

func (c *Console) serveTimeline(ctx *fasthttp.RequestCtx, s *session, _ []string) {
	last := c.feed.Last()
	events := newestFirst(c.feed.Recent(recentEvents, nil))
	d := c.data(s, "timeline", "Timeline", events)
	d.Stream, d.Last = "all", last
	c.render(ctx, fasthttp.StatusOK, "timeline", d)
}

// gatewayRow is one line of the gateways page.
type gatewayRow struct {
	ID       string
	Acked    uint64
	Behind   uint64
	LastSeen string
	Silence  string
	Silent   bool
}

func (c *Console) serveGateways(ctx *fasthttp.RequestCtx, s *session, _ []string) {
	var gws gatewaysJSON
	if err := c.get("/v1/admin/gateways", &gws); err != nil {
		c.failed(ctx, s, err)
		return
	}
	rows := make([]gatewayRow, 0, len(gws.Gateways))
	for _, g := range gws.Gateways {
		seen := parseTime(g.LastSeen)
		rows = append(rows, gatewayRow{ID: g.ID, Acked: g.Acked, Behind: g.Lag, LastSeen: clockText(seen), Silence: since(c.now(), seen), Silent: g.Silent})
	}
	body := struct {
		Seq             uint64
		ServeWhenSilent bool
		Rows            []gatewayRow
	}{gws.Seq, gws.SilentGateways == "serve", rows}
	d := c.data(s, "gateways", "Gateways", body)
	d.Poll = pollGateways
	c.render(ctx, fasthttp.StatusOK, "gateways", d)
}

// overridesShown is how many QoS overrides the Overrides page lists
// (then their count, and where to read them all): there may be
// qos_overrides (10,000), a 5 MB page re-read every 5 s.
const overridesShown = 500

// overrideRow is one QoS override. SelectorJSON is its selector as the
// admin API spelled it: End sends it back with the id (PUT /v1/admin/qos,
// ttl_ms 1, as capgate admin qos end), so the page ends exactly this one.
type overrideRow struct {
	ID, Selector, LogLevel, Monitor, Rate, Until string
	SelectorJSON                                 string
}

func (c *Console) serveOverrides(ctx *fasthttp.RequestCtx, s *session, _ []string) {
	var q qosJSON
	if err := c.get("/v1/admin/qos", &q); err != nil {
		c.failed(ctx, s, err)
		return
	}
	rows := make([]overrideRow, 0, min(len(q.Overrides), overridesShown))
	for _, o := range q.Overrides[:min(len(q.Overrides), overridesShown)] {
		sel := o.Selector
		rate := "–"
		if o.MaxBytesPerSec > 0 {
			rate = strconv.FormatInt(o.MaxBytesPerSec, 10) + " B/s"
		}
		selJSON, _ := json.Marshal(sel)
		rows = append(rows, overrideRow{
			ID: o.ID, Selector: joinOr(sel.Parts(), "–"), LogLevel: orDash(o.LogLevel), Monitor: orDash(o.Monitor),
			Rate: rate, Until: clockText(time.Unix(o.Until, 0)), SelectorJSON: string(selJSON),
		})
	}
	body := struct {
		Rows  []overrideRow
		Total int
	}{rows, len(q.Overrides)}
	d := c.data(s, "overrides", "Overrides", body)
	d.Poll = pollGroups // an override expires; another operator sets one
	c.render(ctx, fasthttp.StatusOK, "overrides", d)
}

func newestFirst(events []timeline.Event) []timeline.Event {
	slices.Reverse(events)
	return events
}

func msText(ms int64) string {
	return (time.Duration(ms) * time.Millisecond).String()
}

func movesText(n int) string {
	if n == 0 {
		return "unlimited"
	}
	return strconv.Itoa(n)
}

func clockText(t time.Time) string {
	if t.IsZero() {
		return "–"
	}
	return t.UTC().Format("15:04:05.000")
}

// since says how long before now t was, coarsely.
func since(now, t time.Time) string {
	if t.IsZero() {
		return "–"
	}
	d := now.Sub(t)
	switch {
	case d < time.Second:
		return fmt.Sprintf("%d ms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1f s", d.Seconds())
	}
	return d.Truncate(time.Second).String()
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

func joinOr(parts []string, empty string) string {
	if len(parts) == 0 {
		return empty
	}
	out := parts[0]
	for _, p := range parts[1:] {
		out += ", " + p
	}
	return out
}
