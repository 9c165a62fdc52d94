package kafkaproto

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/client"
	"github.com/capgate/capgate/internal/coordinators"
	"github.com/capgate/capgate/tlsconf"
)

// tenantGroups reads a tenant's own groups from the coordinator
// (GET /v1/groups, GET /v1/groups/{group}) with the Kafka principal's
// own token: a client credential or IdP token, never the admin token, so
// the coordinator decides what the tenant may see exactly as it decides
// its joins. Safe for concurrent use.
type tenantGroups struct {
	base string
	http *http.Client
}

// tenantGroupsBodyMax bounds one answer read from the coordinator.
const tenantGroupsBodyMax = 16 << 20

// tenantGroupsOf is the server's reader, made on first use: one HTTP
// client per listener, following the coordinator replicas' leader as the
// group sessions do; Close drops its idle connections.
func tenantGroupsOf(s *Server) *tenantGroups {
	s.tenantsOnce.Do(func() { s.tenants = newTenantGroups(s.cfg.CoordinatorURL, s.cfg.CoordinatorTLS) })
	return s.tenants
}

func newTenantGroups(coordinatorURL string, tc *tlsconf.Client) *tenantGroups {
	t := http.DefaultTransport.(*http.Transport).Clone()
	tc.Apply(t)
	hc := &http.Client{Transport: t}
	base := strings.TrimRight(coordinatorURL, "/")
	if urls := coordinators.Split(coordinatorURL); len(urls) > 0 {
		if led, err := client.WithCoordinators(hc, urls); err == nil { // checked by the gateway's config
			hc = led
		}
		base = strings.TrimRight(urls[0], "/")
	}
	return &tenantGroups{base: base, http: hc}
}

// list reads one page of the groups token may join, after after.
func (t *tenantGroups) list(ctx context.Context, token, after string) (api.TenantGroupsResponse, error) {
	var out api.TenantGroupsResponse
	u := t.base + "/v1/groups"
	if after != "" {
		u += "?after=" + url.QueryEscape(after)
	}
	return out, t.get(ctx, u, token, &out)
}

// describe reads one group token may join.
func (t *tenantGroups) describe(ctx context.Context, token, group string) (api.TenantGroupDescription, error) {
	var out api.TenantGroupDescription
	return out, t.get(ctx, t.base+"/v1/groups/"+url.PathEscape(group), token, &out)
}

// committed reads the committed offsets of a group token may join.
func (t *tenantGroups) committed(ctx context.Context, token, group string) (api.OffsetsResponse, error) {
	var out api.OffsetsResponse
	return out, t.get(ctx, t.base+"/v1/groups/"+url.PathEscape(group)+"/committed", token, &out)
}

// get sends one GET; a refusal is a *client.Error (client.CodeOf reads
// its code; a transport failure is unavailable).
func (t *tenantGroups) get(ctx context.Context, u, token string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := t.http.Do(req)
	if err != nil {
		return fmt.Errorf("kafkaproto: tenant groups: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, tenantGroupsBodyMax+1))
	switch {
	case err != nil:
		return fmt.Errorf("kafkaproto: tenant groups: read answer: %w", err)
	case len(body) > tenantGroupsBodyMax:
		return fmt.Errorf("kafkaproto: tenant groups: answer over %d bytes", tenantGroupsBodyMax)
	case resp.StatusCode != http.StatusOK:
		return refusal(resp, body)
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("kafkaproto: tenant groups: decode answer: %w", err)
	}
	return nil
}

// refusal is the coordinator's refusal as a *client.Error.
func refusal(resp *http.Response, body []byte) error {
	e := &client.Error{Op: "tenant groups", Status: resp.StatusCode, Code: api.CodeUnavailable, Message: http.StatusText(resp.StatusCode)}
	var wire api.ErrorBody
	if json.Unmarshal(body, &wire) == nil && wire.Error.Code != "" {
		e.Code, e.Message = wire.Error.Code, wire.Error.Message
	}
	return e
}
