package authz

import "github.com/capgate/capgate/api"

// Reason is Decide's verdict, one of a closed set: Allow or the single
// reason a request is refused.
type Reason uint8

// The reasons, in the order Decide checks them: is the capability still
// alive (expiry, then the revocations), then does it cover the request.
const (
	Allow Reason = iota
	Expired
	Fenced
	Denied
	RevokedMember
	WrongTopic
	WrongPartition
	WrongOp
	OffsetOutsideRange

	reasonCount
)

type reasonRow struct {
	name    string
	code    api.Code
	message string
}

var reasonTable = [reasonCount]reasonRow{
	Allow:              {"allow", "", ""},
	Expired:            {"expired", api.CodeTokenExpired, "capability expired"},
	Fenced:             {"fenced epoch", api.CodeCapabilityRevoked, "capability epoch is fenced: the partition moved"},
	Denied:             {"denied jti", api.CodeCapabilityRevoked, "capability (or an ancestor) is denied"},
	RevokedMember:      {"revoked member", api.CodeCapabilityRevoked, "the capability's member is revoked"},
	WrongTopic:         {"wrong topic", api.CodeForbidden, "capability does not cover this topic"},
	WrongPartition:     {"wrong partition", api.CodeForbidden, "capability does not cover this partition"},
	WrongOp:            {"wrong op", api.CodeForbidden, "capability does not allow this operation"},
	OffsetOutsideRange: {"offset outside range", api.CodeForbidden, "offset outside the capability's range"},
}

// Reasons lists every reason, Allow first.
func Reasons() []Reason {
	out := make([]Reason, reasonCount)
	for i := range out {
		out[i] = Reason(i)
	}
	return out
}

func (r Reason) row() reasonRow {
	if r >= reasonCount {
		panic("authz: reason out of the closed set")
	}
	return reasonTable[r]
}

// String is the reason's name ("fenced epoch").
func (r Reason) String() string { return r.row().name }

// Code is the api error code of a refusal; "" for Allow.
func (r Reason) Code() api.Code { return r.row().code }

// Message is a human-readable sentence for the error body; "" for Allow.
func (r Reason) Message() string { return r.row().message }

// Status is the HTTP status of the reason: 200 for Allow, else the api
// table's status for Code.
func (r Reason) Status() int {
	if r == Allow {
		return 200
	}
	return r.Code().Status()
}
