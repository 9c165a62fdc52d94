package failguard

// Known holders: the second path past a spent address budget.
//
// An address's budget alone punishes everyone behind the address for
// one client's failures: a neighbour behind the same NAT, SNAT, /64 or
// untrusted proxy sending ~20 forged tokens a second kept every fresh
// valid token from that address (each capability renewal, each grant, a
// fresh credential) refused 429 for as long as it went on (redteam6 #2).
// So a Guard that remembers holders (Remember) also keeps, per address,
// the holders whose tokens verified from it (Verified): a token's tenant
// (tnt: every capability a join or heartbeat granted; for a client
// credential's members the credential's jti, 128 random bits shared by
// all its members and renewals), else its iss and sub — a member
// token's member, a client credential's name, an IdP token's issuer and
// subject (HolderOf). Once the address's budget is spent, a token whose
// *unverified* claims (Claimed) name a holder verified from that address
// before is still checked, charged to that (address, holder)'s own
// small bucket; its failure takes from that bucket alone (Rejected). A
// token naming any other holder is refused unchecked as before, so
// varying the claims buys an attacker no check: the checks past the
// address's budget are bounded by the holders verified from the address
// (at most PerAddress) times their budgets, and entering the set takes a
// token that verifies (or a server's VerifiedAs for what it minted).
//
// Holders are kept as 128 bits of SHA-256, so an entry has a fixed size
// whatever the token claims; the table holds at most Max entries and
// PerAddress per address, and forgets a holder not verified again for
// TTL. Each holder has an owner (VerifiedAs: itself, or the tenant whose
// join minted it, or Pool); a full address drops the least recently
// verified holder of the owner with the most holders there, so one
// owner's many holders (a neighbour's 270 joins) push out only its own
// (redteam8 #1); a full table drops the least recently verified
// address's oldest holder.

import (
	"container/list"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"net/netip"
	"strings"
	"time"
)

// Holders configures a Guard's known-holder path (Guard.Remember).
type Holders struct {
	// PerSecond and Burst are each (address, holder)'s budget of failures
	// once its address's budget is spent.
	PerSecond float64
	Burst     int
	// PerAddress and Max bound the holders remembered per address and in
	// all; TTL is how long a holder is remembered after it last verified.
	PerAddress int
	Max        int
	TTL        time.Duration
}

// maxClaimedBytes bounds a token whose claimed holder is read (an IdP
// token's own cap, identity.Config.MaxTokenBytes, defaults to 16 KiB).
const maxClaimedBytes = 16 << 10

// Holder identifies who a token claims to be held by: 128 bits of
// SHA-256 of its iss and sub (whatever its kind: a member token and its
// member's capabilities are one holder).
type Holder [16]byte

// Claimed is the holder token names, unverified: its payload's tnt
// claim when it has one, else its iss and sub (HolderOf); false when
// token is not a JWT with a sub.
func Claimed(token string) (Holder, bool) {
	if len(token) > maxClaimedBytes {
		return Holder{}, false
	}
	_, rest, ok := strings.Cut(token, ".")
	payload, _, ok2 := strings.Cut(rest, ".")
	if !ok || !ok2 {
		return Holder{}, false
	}
	raw, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return Holder{}, false
	}
	var c struct {
		Iss string `json:"iss"`
		Sub string `json:"sub"`
		Tnt string `json:"tnt"`
	}
	if json.Unmarshal(raw, &c) != nil || c.Sub == "" {
		return Holder{}, false
	}
	return HolderOf(c.Iss, c.Sub, c.Tnt), true
}

// HolderOf is the holder of a verified token's iss, sub and tnt
// (Claimed's, for a token with these claims): its tenant (tnt, with its
// issuer) when it names one — every capability a join or heartbeat
// granted does: for a client credential's members the credential's jti,
// 128 random bits no one outside learns and that every member and
// renewal of the credential shares — else its issuer and subject.
func HolderOf(iss, sub, tnt string) Holder {
	h := sha256.New()
	fields := [...]string{"sub", iss, sub}
	if tnt != "" {
		fields = [...]string{"tnt", iss, tnt}
	}
	for _, s := range fields {
		_ = binary.Write(h, binary.BigEndian, uint32(len(s)))
		h.Write([]byte(s))
	}
	var id Holder
	copy(id[:], h.Sum(nil))
	return id
}

// Pool is the owner (VerifiedAs) of holders that whoever holds them can
// multiply (a member token's member: each join makes one): they make
// room among themselves, not by pushing out others. No HolderOf is it.
var Pool Holder

// Pass is a Guard's leave to verify one token (Admit): on its address's
// budget, or, that one spent, on its known holder's.
type Pass struct {
	addr     netip.Addr
	holder   Holder
	onHolder bool // admitted on the holder's budget
}

// OnHolder reports whether the pass was given on the known-holder path.
func (p Pass) OnHolder() bool { return p.onHolder }

// HolderStats are the known-holder path's counts.
type HolderStats struct {
	Holders  int    // remembered now
	Admitted uint64 // tokens checked past a spent address budget
	Refused  uint64 // tokens of a known holder refused: its own budget spent
}

type holderKey struct {
	addr netip.Addr // Key(addr)
	id   Holder
}

type holder struct {
	key    holderKey
	owner  Holder    // whose act put it there (VerifiedAs)
	seen   time.Time // last verified
	bucket bucket
	at     *addrHolders
}

type addrHolders struct {
	addr    netip.Addr
	holders list.List      // of *holder, front: most recently verified
	owners  map[Holder]int // holders per owner
	el      *list.Element  // in holderTable.addrs
}

// holderTable is the known holders: a two-level LRU (addresses by their
// latest verification, each address's holders likewise).
type holderTable struct {
	cfg      Holders
	byKey    map[holderKey]*list.Element // in its address's holders
	byAddr   map[netip.Addr]*addrHolders
	addrs    list.List // of *addrHolders, front: most recently verified
	admitted uint64
	refused  uint64
}

// Remember turns g's known-holder path on with cfg and returns g (call
// it before g is used).
func (g *Guard) Remember(cfg Holders) *Guard {
	cfg.Burst, cfg.PerAddress, cfg.Max = max(cfg.Burst, 1), max(cfg.PerAddress, 1), max(cfg.Max, 1)
	g.holders = &holderTable{cfg: cfg, byKey: map[holderKey]*list.Element{}, byAddr: map[netip.Addr]*addrHolders{}}
	return g
}

// Admit is Check for one token: a Pass while addr may have
// it verified, else a *Spent. Past addr's budget, a guard that remembers
// holders admits the token if the holder it claims (Claimed) verified
// from addr within TTL and has failures left; the claim is read only
// when addr has any holder.
func (g *Guard) Admit(addr netip.Addr, token string, now time.Time) (Pass, error) {
	p := Pass{addr: addr}
	if g == nil || g.perSecond <= 0 {
		return p, nil
	}
	wait, blocked := g.Blocked(addr, now)
	if !blocked {
		return p, nil
	}
	spent := &Spent{Wait: max(wait, time.Millisecond), holders: g.holders != nil}
	if g.holders == nil || !g.anyHolder(addr) {
		return p, spent
	}
	id, ok := Claimed(token)
	if !ok {
		return p, spent
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	t := g.holders
	h := t.lookup(holderKey{Key(addr), id}, now)
	if h == nil {
		return p, spent
	}
	tokens := refill(&h.bucket, now, t.cfg.PerSecond, float64(t.cfg.Burst))
	if tokens < 1 {
		t.refused++
		spent.holder = true
		if t.cfg.PerSecond > 0 {
			spent.Wait = min(spent.Wait, max(time.Duration((1-tokens)/t.cfg.PerSecond*float64(time.Second)), time.Millisecond))
		}
		return p, spent
	}
	t.admitted++
	p.holder, p.onHolder = id, true
	return p, nil
}

// Verified remembers holder h as verified from addr at now (again, if
// it was): a token of it verified there. It is its own owner
// (VerifiedAs).
func (g *Guard) Verified(addr netip.Addr, h Holder, now time.Time) {
	g.VerifiedAs(addr, h, h, now)
}

// VerifiedAs is Verified for a holder owned by owner when it is new at
// addr (one already there keeps its owner): the server minted its first
// token in answer to a request from addr that owner authenticated (a
// join's new member, owned by the joining credential's tenant), or a
// token of a kind whose holders its holder can multiply verified. A full
// address makes room by dropping a holder of the owner with the most
// holders there (fair), so one owner's many holders cannot push out
// another's.
func (g *Guard) VerifiedAs(addr netip.Addr, h, owner Holder, now time.Time) {
	if g == nil || g.holders == nil || g.perSecond <= 0 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.holders.verified(holderKey{Key(addr), h}, owner, now)
}

// Rejected charges p's token's failed verification: to its holder's
// budget when it was admitted on it, else to its address (Failed).
func (g *Guard) Rejected(p Pass, now time.Time) {
	if !p.onHolder {
		g.Failed(p.addr, now)
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	t := g.holders
	if h := t.lookup(holderKey{Key(p.addr), p.holder}, now); h != nil {
		h.bucket.tokens = refill(&h.bucket, now, t.cfg.PerSecond, float64(t.cfg.Burst)) - 1
		h.bucket.last = now
	}
}

// Stats are the known-holder path's counts (zero if it is off).
func (g *Guard) Stats() HolderStats {
	if g == nil || g.holders == nil {
		return HolderStats{}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	t := g.holders
	return HolderStats{Holders: len(t.byKey), Admitted: t.admitted, Refused: t.refused}
}

func (g *Guard) anyHolder(addr netip.Addr) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.holders.byAddr[Key(addr)] != nil
}

// lookup is k's holder, nil if unknown or forgotten (TTL: then dropped).
func (t *holderTable) lookup(k holderKey, now time.Time) *holder {
	el := t.byKey[k]
	if el == nil {
		return nil
	}
	h := el.Value.(*holder)
	if now.Sub(h.seen) > t.cfg.TTL {
		t.remove(el)
		return nil
	}
	return h
}

// verified remembers k as verified at now, making room first: a full
// address drops the least recently verified holder of its owner with
// the most holders (counting k's owner's with k; on a tie k's owner's
// own), a full table the least recently verified address's oldest.
func (t *holderTable) verified(k holderKey, owner Holder, now time.Time) {
	if el := t.byKey[k]; el != nil {
		h := el.Value.(*holder)
		h.seen = now
		h.at.holders.MoveToFront(el)
		t.addrs.MoveToFront(h.at.el)
		return
	}
	if a := t.byAddr[k.addr]; a != nil && a.holders.Len() >= t.cfg.PerAddress {
		t.remove(a.evictee(owner))
	} else if len(t.byKey) >= t.cfg.Max {
		t.remove(t.addrs.Back().Value.(*addrHolders).holders.Back())
	}
	a := t.byAddr[k.addr]
	if a == nil {
		a = &addrHolders{addr: k.addr, owners: map[Holder]int{}}
		a.el = t.addrs.PushFront(a)
		t.byAddr[k.addr] = a
	} else {
		t.addrs.MoveToFront(a.el)
	}
	a.owners[owner]++
	t.byKey[k] = a.holders.PushFront(&holder{key: k, owner: owner, seen: now, at: a})
}

// evictee is the holder a's full list drops for a new one of owner: the
// least recently verified of the owner with the most holders, owner's
// own (counted with the newcomer) on a tie; the least recently verified
// of all when every owner has one (owner none yet).
func (a *addrHolders) evictee(owner Holder) *list.Element {
	most, top := owner, a.owners[owner]+1
	for o, n := range a.owners {
		if n > top {
			most, top = o, n
		}
	}
	if a.owners[most] == 0 {
		return a.holders.Back()
	}
	for el := a.holders.Back(); el != nil; el = el.Prev() {
		if el.Value.(*holder).owner == most {
			return el
		}
	}
	return a.holders.Back()
}

func (t *holderTable) remove(el *list.Element) {
	h := el.Value.(*holder)
	h.at.holders.Remove(el)
	delete(t.byKey, h.key)
	if h.at.owners[h.owner]--; h.at.owners[h.owner] <= 0 {
		delete(h.at.owners, h.owner)
	}
	if h.at.holders.Len() == 0 {
		t.addrs.Remove(h.at.el)
		delete(t.byAddr, h.at.addr)
	}
}
