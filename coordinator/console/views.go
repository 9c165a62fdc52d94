package console

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/api"
)

// What the console reads from the admin API: the fields it shows of
// GroupsResponse, GroupDescription, GroupSummary, GatewaysResponse and
// the QoS list.
// (The console is an API client like the CLI; it keeps its own copy of the
// shapes so the coordinator package need not export them twice.)

type groupsJSON struct {
	Groups    []string           `json:"groups"`
	NextAfter string             `json:"next_after"`
	Summaries []groupSummaryJSON `json:"summaries"` // with ?summaries=true
}

type groupJSON struct {
	Group string `json:"group"`
	// MovesHeldBack: moves the group wants that max_moves_per_second
	// holds back (the admin API's moves_held_back).
	MovesHeldBack int `json:"moves_held_back"`
	// NextPartitionsAfter: the admin API's answer holds the group's first
	// describe_page_max partitions only; more follow this one.
	NextPartitionsAfter string `json:"next_partitions_after"`
	Config              struct {
		Assignor          string `json:"assignor"`
		SessionTimeoutMs  int64  `json:"session_timeout_ms"`
		HandoffTimeoutMs  int64  `json:"handoff_timeout_ms"`
		MaxMovesPerSecond int    `json:"max_moves_per_second"`
		OffsetReset       string `json:"offset_reset"`
	} `json:"config"`
	Members []struct {
		ID          string   `json:"id"`
		InstanceID  string   `json:"instance_id"`
		ClientID    string   `json:"client_id"`
		Topics      []string `json:"topics"`
		LastContact string   `json:"last_contact"`
		Partitions  int      `json:"partitions"`
		Credential  *struct {
			ID      string `json:"id"`
			Issuer  string `json:"issuer"`
			Subject string `json:"subject"`
		} `json:"credential"`
	} `json:"members"`
	Partitions []partitionJSON `json:"partitions"`
}

// groupSummaryJSON is GET /v1/admin/groups/{g}/summary, and each of
// GET /v1/admin/groups?summaries=true: the groups page's line of a group.
type groupSummaryJSON struct {
	Group  string `json:"group"`
	Config struct {
		MaxMovesPerSecond int `json:"max_moves_per_second"`
	} `json:"config"`
	Members    int    `json:"members"`
	Partitions int    `json:"partitions"`
	Owned      int    `json:"owned"`
	Revoking   int    `json:"revoking"`
	Unowned    int    `json:"unowned"`
	Lag        *int64 `json:"lag"`
}

type partitionJSON struct {
	Topic        string `json:"topic"`
	Partition    int32  `json:"partition"`
	Epoch        uint64 `json:"epoch"`
	State        string `json:"state"`
	Owner        string `json:"owner"`
	OwnerOutside bool   `json:"owner_outside"`
	OwnerEpoch   uint64 `json:"owner_epoch"`
	Target       string `json:"target"`
	GatewaysSafe bool   `json:"gateways_safe"`
	Released     bool   `json:"released"`
	Committed    *int64 `json:"committed"`
	Lag          *int64 `json:"lag"`
	Lease        *struct {
		Holder string `json:"holder"`
		Until  string `json:"until"`
	} `json:"lease"`
}

type gatewaysJSON struct {
	Seq            uint64 `json:"seq"`
	SilentGateways string `json:"silent_gateways"`
	Gateways       []struct {
		ID       string `json:"id"`
		Acked    uint64 `json:"acked_seq"`
		Lag      uint64 `json:"lag"`
		LastSeen string `json:"last_seen"`
		Silent   bool   `json:"silent"`
	} `json:"gateways"`
}

type qosJSON struct {
	Overrides []qosOverride `json:"overrides"`
}

// qosOverride is one of them.
type qosOverride struct {
	ID             string          `json:"id"`
	Selector       api.QoSSelector `json:"selector"`
	LogLevel       string          `json:"log_level"`
	Monitor        string          `json:"monitor"`
	MaxBytesPerSec int64           `json:"max_bytes_per_sec"`
	Until          int64           `json:"until"`
}

// adminError is the admin API's error body.
type adminError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// errNotFound matches (errors.Is) what get returns for a 404, and
// errBadRequest for a 400 (a filter the admin API refuses).
var (
	errNotFound   = errors.New("not found")
	errBadRequest = errors.New("bad request")
)

// badRequestError is a 400 of the admin API, with its message.
type badRequestError struct{ message string }

func (e *badRequestError) Error() string        { return e.message }
func (e *badRequestError) Is(target error) bool { return target == errBadRequest }

// notFoundError is a 404 of the admin API, with its message — "unknown
// group \"nosuch\"" — which the Problem page shows as it is (before, the
// page said "console: not found", naming nothing).
type notFoundError struct{ message string }

func (e *notFoundError) Error() string        { return e.message }
func (e *notFoundError) Is(target error) bool { return target == errNotFound }

// get reads an admin route into dst; a non-200 answer becomes an error
// carrying the admin API's message.
func (c *Console) get(path string, dst any) error {
	status, body := c.backend.Admin("", fasthttp.MethodGet, path, nil)
	if status == fasthttp.StatusOK {
		return json.Unmarshal(body, dst)
	}
	var e adminError
	_ = json.Unmarshal(body, &e)
	if status == fasthttp.StatusBadRequest && e.Error.Message != "" {
		return &badRequestError{e.Error.Message}
	}
	if status == fasthttp.StatusNotFound {
		if e.Error.Message == "" {
			e.Error.Message = "not found: " + path
		}
		return &notFoundError{e.Error.Message}
	}
	return fmt.Errorf("GET %s: %d %s: %s", path, status, e.Error.Code, e.Error.Message)
}

// groupPath is the admin path of a group, its name escaped.
func groupPath(name string) string {
	return "/v1/admin/groups/" + url.PathEscape(name)
}

// parseTime reads the admin API's RFC 3339 times; zero when empty.
func parseTime(s string) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, s)
	return t
}
