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
// already. A transport of a type without == (which cannot be told apart)
// is not claimed.
func claimCampaign(op, holder string, transport Transport, topic string, role Role, member MemberID) (release func(), err error) {
	if !reflect.TypeOf(transport).Comparable() {
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
