package coordination

import (
	"fmt"
	"reflect"
	"sync"
)

// This file holds the claims of the campaigns of this process: at most one
// campaign or leadership for a (transport, state topic, role, member) at a
// time. Two would share the member's registration key and transactional
// id, and each mint would fence the other: a fencing duel, about twice a
// second, instead of an error.

// campaignClaim is what a claim covers. The transport is compared as an
// interface value: the same *KafkaTransport, say. Two transports of one
// cluster are two claims (see ErrDuplicateCampaign).
type campaignClaim struct {
	transport Transport
	topic     string
	role      Role
	member    MemberID
}

// campaignClaims are the claims held in the process, with the call that
// holds each.
var campaignClaims struct {
	mu   sync.Mutex
	held map[campaignClaim]string
}

// claimCampaign claims (transport, topic, role, member) for holder (the
// call, for the error of a second one), and returns the function that
// releases the claim, which the caller calls exactly once. It returns an
// error that wraps ErrDuplicateCampaign when the process holds the claim
// already. A transport value that == cannot compare (reflect's
// Value.Comparable: a type without ==, or an interface field that holds
// one) cannot be told apart, and is not claimed.
func claimCampaign(op, holder string, transport Transport, topic string, role Role, member MemberID) (release func(), err error) {
	if !reflect.ValueOf(transport).Comparable() {
		return func() {}, nil
	}
	claim := campaignClaim{transport: transport, topic: topic, role: role, member: member}
	campaignClaims.mu.Lock()
	defer campaignClaims.mu.Unlock()
	if by, ok := campaignClaims.held[claim]; ok {
		return nil, fmt.Errorf("coordination: %s: member %s of role %s on state topic %s: %s of this process over the same transport runs for it already: "+
			"two would share the registration and the transactional id, and fence each other in turn; run one campaign per member, "+
			"or give each its own member id: %w", op, member, role, topic, by, ErrDuplicateCampaign)
	}
	if campaignClaims.held == nil {
		campaignClaims.held = make(map[campaignClaim]string)
	}
	campaignClaims.held[claim] = holder
	var once sync.Once
	return func() {
		once.Do(func() {
			campaignClaims.mu.Lock()
			defer campaignClaims.mu.Unlock()
			delete(campaignClaims.held, claim)
		})
	}, nil
}

// unwrittenMintWindow is the span, in lease durations, within which a
// second mint that never wrote a lease on the state topic (the token that
// fenced a deposed member, or a rival's mint that the rival-mint watch gave
// up on) stops the campaign with a [ForeignEpochError]. The duel of two
// applications brings one to a member about every two lease durations plus
// the staggers; two challengers that die between mint and lease within it
// are a double fault.
const unwrittenMintWindow = 10

// unwrittenKey is the role of a state topic over one transport.
type unwrittenKey struct {
	transport Transport
	topic     string
	role      Role
}

// unwrittenMints are the latest mint without a lease of each role of the
// process, and when a campaign found it so, in ms.
var unwrittenMints struct {
	mu   sync.Mutex
	seen map[unwrittenKey]unwrittenMint
}

type unwrittenMint struct {
	token FencingToken
	at    int64
}

// recordUnwrittenMint records a mint of the role without a lease on the
// topic at nowMillis, and returns the previous one and true when it is
// another token, seen within window ms. A transport value that == cannot
// compare records nothing. Entries older than the window are forgotten as new
// ones come.
func recordUnwrittenMint(transport Transport, topic string, role Role, token FencingToken, nowMillis, window int64) (FencingToken, bool) {
	if !reflect.ValueOf(transport).Comparable() {
		return FencingToken{}, false
	}
	key := unwrittenKey{transport: transport, topic: topic, role: role}
	unwrittenMints.mu.Lock()
	defer unwrittenMints.mu.Unlock()
	if unwrittenMints.seen == nil {
		unwrittenMints.seen = make(map[unwrittenKey]unwrittenMint)
	}
	for k, m := range unwrittenMints.seen {
		if nowMillis-m.at > window {
			delete(unwrittenMints.seen, k)
		}
	}
	previous, ok := unwrittenMints.seen[key]
	unwrittenMints.seen[key] = unwrittenMint{token: token, at: nowMillis}
	return previous.token, ok && previous.token != token
}
