package group

import "sync"

// MemberTenants is the tenant (Credential.tenant: an OAuth client, an IdP
// identity, else the credential) of every live member, by group and
// member id, readable outside the loop: the shell looks a member token's
// tenant up here before its heartbeat, commit, leave or offsets read
// enters the loop (the coordinator's per-tenant loop share), since a
// member token carries no tnt. The machine keeps it in installMember and
// dropMember (joins, restores, static replacements, leaves, expiries,
// revocations), so it holds exactly the live members; a member's tenant
// never changes (a rebind keeps it), the credential it is bound to does
// (rebind puts it again). Safe for concurrent use: the loop writes,
// request goroutines read.
type MemberTenants struct {
	mu sync.RWMutex
	m  map[memberName]memberTenant
}

// memberTenant is a live member's tenant and the id of the credential it
// is bound to.
type memberTenant struct{ tenant, credential string }

type memberName struct{ group, id string }

func newMemberTenants() *MemberTenants {
	return &MemberTenants{m: make(map[memberName]memberTenant)}
}

// Tenant is the tenant of member id of groupName, and false when no such
// member is live.
func (t *MemberTenants) Tenant(groupName, id string) (string, bool) {
	tenant, _, ok := t.Bound(groupName, id)
	return tenant, ok
}

// Bound is Tenant with the id of the credential the member is bound to
// (Credential.ID): a rejoin by that credential is the member's holder's,
// priced in the member's tenant — which a member rebound to another
// admin-minted credential (renew_credential) keeps, though the
// credential is its own tenant.
func (t *MemberTenants) Bound(groupName, id string) (tenant, credential string, ok bool) {
	t.mu.RLock()
	mt, ok := t.m[memberName{groupName, id}]
	t.mu.RUnlock()
	return mt.tenant, mt.credential, ok
}

// Len is the number of live members indexed.
func (t *MemberTenants) Len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.m)
}

func (t *MemberTenants) put(mem *member) {
	t.mu.Lock()
	t.m[memberName{mem.group.name, mem.id}] = memberTenant{mem.credential.tenant(), mem.credential.ID}
	t.mu.Unlock()
}

func (t *MemberTenants) drop(mem *member) {
	t.mu.Lock()
	delete(t.m, memberName{mem.group.name, mem.id})
	t.mu.Unlock()
}

// MemberTenants is the machine's index of its live members' tenants, for
// reads outside the loop.
func (m *Machine) MemberTenants() *MemberTenants { return m.memberTenants }
