package api

// TenantGroupsResponse is GET /v1/groups: the groups the bearer (a client
// credential or an IdP identity) may join, in name order, after the
// request's after; NextAfter is set when more follow.
type TenantGroupsResponse struct {
	Groups    []TenantGroup `json:"groups"`
	NextAfter string        `json:"next_after,omitempty"`
}

// TenantGroup is one listed group and its state in Kafka's words:
// Empty, Stable, PreparingRebalance or CompletingRebalance.
type TenantGroup struct {
	Group string `json:"group"`
	State string `json:"state"`
}

// TenantGroupDescription is GET /v1/groups/{group}: the group as Kafka's
// DescribeGroups shows it. Truncated is set when members or owned
// partitions beyond the coordinator's describe_page_max were left out.
type TenantGroupDescription struct {
	Group     string         `json:"group"`
	State     string         `json:"state"`
	Assignor  string         `json:"assignor"`
	Members   []TenantMember `json:"members"`
	Truncated bool           `json:"truncated,omitempty"`
}

// TenantMember is one live member: its ids, the topics it subscribes to
// (a pattern member: the topics the pattern resolved to) and the
// partitions it owns now (sorted; one being revoked from it is not
// listed).
type TenantMember struct {
	MemberID   string            `json:"member_id"`
	InstanceID string            `json:"instance_id,omitempty"`
	ClientID   string            `json:"client_id,omitempty"`
	Topics     []string          `json:"topics"`
	Owned      []TenantPartition `json:"owned"`
}

// TenantPartition is one partition a member owns.
type TenantPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}
