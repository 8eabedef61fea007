package coordination

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"
)

// FencingToken is the quorum-minted proof that one member holds a role.
//
// The transaction coordinator mints the pair when a member calls
// InitProducerId for the transactional id of the role. The quorum picks the
// values, the broker enforces them, and a write from an older pair fails with
// a fenced error. A holder passes the token to every guarded write.
//
// The pair is load-bearing. A producer epoch is an int16 and it wraps:
// Kafka then allocates a new producer id and resets the epoch to zero. A
// check on the epoch alone would take that fresh token for a stale one.
// Never compare the epoch on its own.
//
// Authority is equality, not order: the token of the leader is the pair
// that the transaction coordinator holds for the role now
// ([LeadershipStatus.Authoritative], [DescribeLeadership]). Producer ids
// are not monotonic in time, so order the leaderships of a role by the
// offsets of their records, never by [FencingToken.Compare] (see the
// package doc's section "The fencing token is a pair").
//
// A FencingToken is a comparable immutable value: == tests two tokens for
// equality, and a token is safe to share between goroutines.
type FencingToken struct {
	producerID    int64
	producerEpoch int16
}

// NoEpoch is the token of a role that no member has ever taken. Kafka writes
// -1 for "no producer", and that pair proves no leadership. NoEpoch ranks
// below every minted token, because [NewFencingToken] rejects a negative
// value. Treat NoEpoch as a constant.
var NoEpoch = FencingToken{producerID: -1, producerEpoch: -1}

// NewFencingToken builds a token from a minted producer id and producer
// epoch. It rejects a negative value in either position, so only [NoEpoch]
// carries Kafka's -1.
func NewFencingToken(producerID int64, producerEpoch int16) (FencingToken, error) {
	if producerID < 0 {
		return FencingToken{}, fmt.Errorf("coordination: invalid fencing token: negative producer id %d", producerID)
	}
	if producerEpoch < 0 {
		return FencingToken{}, fmt.Errorf("coordination: invalid fencing token: negative producer epoch %d", producerEpoch)
	}
	return FencingToken{producerID: producerID, producerEpoch: producerEpoch}, nil
}

// ParseFencingToken parses the producer_id:producer_epoch form that
// [FencingToken.String] writes, such as "4242:7". It rejects another shape,
// a value out of range, and a negative value, with an error that quotes the
// text. It parses "-1:-1" as [NoEpoch], so the String form of every token
// parses back, and it accepts only that canonical form: no sign, no leading
// zero, no space.
func ParseFencingToken(text string) (FencingToken, error) {
	idText, epochText, found := strings.Cut(text, ":")
	if !found {
		return FencingToken{}, fmt.Errorf("coordination: invalid fencing token %q: want producer_id:producer_epoch", text)
	}
	id, err := strconv.ParseInt(idText, 10, 64)
	if err != nil {
		return FencingToken{}, fmt.Errorf("coordination: invalid fencing token %q: producer id: %w", text, err)
	}
	epoch, err := strconv.ParseInt(epochText, 10, 16)
	if err != nil {
		return FencingToken{}, fmt.Errorf("coordination: invalid fencing token %q: producer epoch: %w", text, err)
	}
	token := NoEpoch
	if id != -1 || epoch != -1 {
		token, err = NewFencingToken(id, int16(epoch))
		if err != nil {
			return FencingToken{}, fmt.Errorf("coordination: invalid fencing token %q: %w", text, err)
		}
	}
	if token.String() != text {
		return FencingToken{}, fmt.Errorf("coordination: invalid fencing token %q: not the canonical form %q", text, token.String())
	}
	return token, nil
}

// ProducerID returns the producer id that the transaction coordinator
// minted, or -1 for [NoEpoch].
func (t FencingToken) ProducerID() int64 { return t.producerID }

// ProducerEpoch returns the producer epoch that the transaction coordinator
// minted, or -1 for [NoEpoch].
func (t FencingToken) ProducerEpoch() int16 { return t.producerEpoch }

// Compare orders two tokens lexicographically: the producer id first, and
// the producer epoch only for two tokens of one producer id. It returns a
// negative number when t ranks below other, zero for two equal tokens, and
// a positive number when t ranks above other.
//
// The order is a fixed total order on pairs, for sorting and display, and
// it is the order of minting only within one producer id, whose epoch
// grows by one at every mint. Across producer ids it says nothing about
// which token is newer: Kafka's brokers allocate producer ids from blocks
// of their own, so a later mint may carry a smaller id (2:0 was seen after
// 1001:32766 when the role's coordinator moved to another broker). Decide
// authority by equality with the coordinator's pair
// ([LeadershipStatus.Authoritative]), and order leaderships by the commit
// order of their records in the log.
func (t FencingToken) Compare(other FencingToken) int {
	if c := cmp.Compare(t.producerID, other.producerID); c != 0 {
		return c
	}
	return cmp.Compare(t.producerEpoch, other.producerEpoch)
}

// Supersedes reports whether t ranks above other under
// [FencingToken.Compare]. Within one producer id it tells the later mint;
// across producer ids it does not (see Compare): it is no test of
// authority.
func (t FencingToken) Supersedes(other FencingToken) bool { return t.Compare(other) > 0 }

// String writes the producer_id:producer_epoch form, such as "4242:7".
// [NoEpoch] writes "-1:-1".
func (t FencingToken) String() string {
	return strconv.FormatInt(t.producerID, 10) + ":" + strconv.FormatInt(int64(t.producerEpoch), 10)
}
