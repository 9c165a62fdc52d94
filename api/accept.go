package api

import (
	"bytes"
	"strings"
)

// maxOffers bounds the media types one answer can be offered in.
const maxOffers = 4

// Negotiate picks the media type of an answer among offers (the server's
// order of preference) by a request's Accept header (RFC 9110 §12.5.1),
// without allocating.
//
// Each offer takes the q of the most specific media range matching it
// (type/subtype over type/* over */*; types matched case-insensitively,
// whitespace around elements and parameters ignored, parameters other
// than q ignored; of equally specific ranges the highest q). An offer no
// range matches, or whose range says q=0, is refused: "*/*, application/json;q=0"
// refuses JSON. The highest q wins; a tie goes to the offer matched by
// the more specific range ("application/vnd.kafka.record-batch, */*"
// picks the record batches), then to the earlier offer. No Accept header,
// or one of which no element parses (a range without a slash, a q that
// is not a qvalue), accepts offers[0]. ok is false when every offer is
// refused: the answer is 406 not_acceptable.
func Negotiate(accept []byte, offers ...string) (media string, ok bool) {
	if len(offers) == 0 || len(offers) > maxOffers {
		panic("api: Negotiate takes 1 to 4 offers")
	}
	var best [maxOffers]struct{ specificity, q int } // q in thousandths
	parsed := false
	for len(accept) > 0 {
		var element []byte
		element, accept, _ = bytes.Cut(accept, []byte(","))
		mediaRange, q, valid := parseAcceptElement(element)
		if !valid {
			continue
		}
		parsed = true
		for i, offer := range offers {
			if s := specificity(mediaRange, offer); s > best[i].specificity || (s > 0 && s == best[i].specificity && q > best[i].q) {
				best[i].specificity, best[i].q = s, q
			}
		}
	}
	if !parsed {
		return offers[0], true
	}
	chosen := -1
	for i := range offers {
		if best[i].q == 0 {
			continue
		}
		if chosen < 0 || best[i].q > best[chosen].q || (best[i].q == best[chosen].q && best[i].specificity > best[chosen].specificity) {
			chosen = i
		}
	}
	if chosen < 0 {
		return "", false
	}
	return offers[chosen], true
}

// parseAcceptElement splits one element of an Accept header into its
// media range and its q (thousandths, 1000 when absent); valid is false
// for an empty element, a range that is not type/subtype, */subtype, or
// a q that is not a qvalue (RFC 9110 §12.4.2).
func parseAcceptElement(element []byte) (mediaRange []byte, q int, valid bool) {
	mediaRange, params, _ := bytes.Cut(element, []byte(";"))
	mediaRange = bytes.Trim(mediaRange, " \t")
	typ, sub, found := bytes.Cut(mediaRange, []byte("/"))
	if !found || len(typ) == 0 || len(sub) == 0 || (string(typ) == "*" && string(sub) != "*") {
		return nil, 0, false
	}
	q = 1000
	for len(params) > 0 {
		var param []byte
		param, params, _ = bytes.Cut(params, []byte(";"))
		name, value, _ := bytes.Cut(bytes.Trim(param, " \t"), []byte("="))
		if !bytes.EqualFold(bytes.TrimRight(name, " \t"), []byte("q")) {
			continue
		}
		if q, valid = parseQValue(bytes.Trim(value, " \t")); !valid {
			return nil, 0, false
		}
		break // what follows q is accept-ext
	}
	return mediaRange, q, true
}

// parseQValue parses "0", "0.5", "1.000" and the like into thousandths.
func parseQValue(v []byte) (int, bool) {
	if len(v) == 0 || (v[0] != '0' && v[0] != '1') || len(v) > 5 || (len(v) > 1 && v[1] != '.') {
		return 0, false
	}
	q := int(v[0]-'0') * 1000
	scale := 100
	for _, c := range v[min(len(v), 2):] {
		if c < '0' || c > '9' {
			return 0, false
		}
		q += int(c-'0') * scale
		scale /= 10
	}
	return q, q <= 1000
}

// specificity is how specifically mediaRange matches offer: 3 for
// type/subtype, 2 for type/*, 1 for */*, 0 for no match.
func specificity(mediaRange []byte, offer string) int {
	typ, sub, _ := bytes.Cut(mediaRange, []byte("/"))
	offerType, offerSub, _ := strings.Cut(offer, "/")
	switch {
	case string(typ) == "*":
		return 1
	case !equalFold(typ, offerType):
		return 0
	case string(sub) == "*":
		return 2
	case equalFold(sub, offerSub):
		return 3
	}
	return 0
}

// equalFold is bytes.EqualFold for ASCII without converting s.
func equalFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		x, y := b[i], s[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
