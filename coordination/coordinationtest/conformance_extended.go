package coordinationtest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// This file holds the checks of the methods of
// [coordination.ExtendedTransport] beside the followers' and WriteGuarded
// (conformance.go).

// runExtended runs the checks of the other methods of the contract.
func (s *suite) runExtended(t *testing.T) {
	t.Helper()
	t.Run("LeaseConfig", s.leaseConfig)
	t.Run("CheckStateTopic", s.checkStateTopic)
	t.Run("WriteTombstones", s.writeTombstones)
	t.Run("StableOffsetsAndTopicIncarnation", s.stableOffsets)
	t.Run("MintedAndFenced", s.mintedAndFenced)
	t.Run("LateMintAndAcquireEpochUnless", s.lateMint)
	t.Run("LateMintAfterALostReply", s.lateMintAfterALostReply)
	t.Run("AcquireEpochUnlessAfterARivalsMint", s.acquireEpochUnlessMoved)
	t.Run("WatchPartition", s.watchPartition) // conformance_watch.go
	t.Run("WatchRoles", s.watchRoles)
	t.Run("WatchStops", s.watchStops)
}

// leaseConfig: the policy is none (zero) or one that NewLeaseConfig
// accepts, and it does not change.
func (s *suite) leaseConfig(t *testing.T) {
	transport := s.extended(t, s.target.NewTransport(t))
	policy := transport.LeaseConfig()
	if policy == (coordination.LeaseConfig{}) {
		return
	}
	if _, err := coordination.NewLeaseConfig(policy.Duration(), policy.RenewInterval(), policy.ChallengeStagger()); err != nil {
		t.Fatalf("LeaseConfig() = %+v, which NewLeaseConfig refuses: %v", policy, err)
	}
	if again := transport.LeaseConfig(); again != policy {
		t.Fatalf("LeaseConfig() = %+v, then %+v; want one policy", policy, again)
	}
}

// checkStateTopic: the target's topic passes; the same topic with a
// partition count it does not have (7919) fails with ErrMisconfigured.
func (s *suite) checkStateTopic(t *testing.T) {
	transport := s.extended(t, s.target.NewTransport(t))
	if err := transport.CheckStateTopic(s.ctx(t), s.target.Options...); err != nil {
		t.Fatalf("CheckStateTopic of the suite's topic: %v", err)
	}
	options := append(append([]coordination.Option(nil), s.target.Options...), coordination.WithPartitions(7919))
	if err := transport.CheckStateTopic(s.ctx(t), options...); !errors.Is(err, coordination.ErrMisconfigured) {
		t.Fatalf("CheckStateTopic with WithPartitions(7919) = %v; want an error that wraps ErrMisconfigured", err)
	}
}

// writeTombstones: the lease's and the registration's tombstones land
// together under the token, in order; under a fenced token nothing lands.
func (s *suite) writeTombstones(t *testing.T) {
	holder, rival := s.target.NewTransport(t), s.target.NewTransport(t)
	extended := s.extended(t, holder)
	role, partition := s.role(t)
	token := s.mint(t, holder, role)
	leaseKey := coordination.EncodeKey(coordination.LeaseKey(role))
	registrationKey := coordination.EncodeKey(coordination.RegistrationKey(role, member(t, "a")))
	registration := coordination.EncodeRegistration(coordination.Registration{Member: member(t, "a"), RegisteredAt: time.Now().UnixMilli()})
	if err := holder.Append(s.ctx(t), partition, registrationKey, registration); err != nil {
		t.Fatalf("Append: %v", err)
	}
	if err := holder.WriteLease(s.ctx(t), partition, token, leaseKey, lease(t, "a", token)); err != nil {
		t.Fatalf("WriteLease: %v", err)
	}
	if err := extended.WriteTombstones(s.ctx(t), partition, token, leaseKey, registrationKey); err != nil {
		t.Fatalf("WriteTombstones under the newest token %s: %v", token, err)
	}
	records := s.records(t, holder, role, partition)
	if len(records) != 4 || !coordination.IsTombstone(records[2].Value) || !coordination.IsTombstone(records[3].Value) ||
		string(records[2].Key) != string(leaseKey) || string(records[3].Key) != string(registrationKey) {
		t.Fatalf("after WriteTombstones the role holds %d records (offsets %v); want the registration, the lease, then the lease's and the registration's tombstones", len(records), offsets(records))
	}
	if state := s.state(t, holder, role, partition); state.Lease != nil || len(state.Roster) != 0 {
		t.Fatalf("after WriteTombstones the role folds to %+v; want no lease and an empty roster", state)
	}
	newer := s.mint(t, rival, role)
	if err := extended.WriteTombstones(s.ctx(t), partition, token, leaseKey); !errors.Is(err, coordination.ErrFenced) {
		t.Fatalf("WriteTombstones under %s after the rival minted %s = %v; want an error that wraps ErrFenced", token, newer, err)
	}
	if after := s.records(t, holder, role, partition); len(after) != len(records) {
		t.Fatalf("a fenced WriteTombstones left %d records; want %d", len(after), len(records))
	}
}

// stableOffsets: no report before the transport read the partition; after
// a read, the last stable offset covers the record read and is at most the
// high watermark; the topic was not created again.
func (s *suite) stableOffsets(t *testing.T) {
	transport := s.target.NewTransport(t)
	extended := s.extended(t, transport)
	role, partition := s.role(t)
	if _, _, ok := extended.StableOffsets(partition); ok {
		t.Fatalf("StableOffsets(%s) reported offsets before any read of the partition", partition)
	}
	key := coordination.EncodeKey(coordination.RegistrationKey(role, member(t, "a")))
	value := coordination.EncodeRegistration(coordination.Registration{Member: member(t, "a"), RegisteredAt: time.Now().UnixMilli()})
	if err := transport.Append(s.ctx(t), partition, key, value); err != nil {
		t.Fatalf("Append: %v", err)
	}
	var last int64 = -1
	s.eventually(t, "ReadRolesFrom returns the appended registration", func() (bool, string) {
		records, _, err := extended.ReadRolesFrom(s.ctx(t), partition, []coordination.Role{role}, 0)
		if err != nil {
			return false, err.Error()
		}
		if len(records) == 0 {
			return false, "no record"
		}
		last = records[len(records)-1].Offset
		return true, ""
	})
	stable, high, ok := extended.StableOffsets(partition)
	if !ok || stable <= last || high < stable {
		t.Fatalf("StableOffsets(%s) after a read up to offset %d = %d, %d, %t; want ok, a last stable offset past %d, and a high watermark at or above it",
			partition, last, stable, high, ok, last)
	}
	if n := extended.TopicIncarnation(partition); n != 0 {
		t.Fatalf("TopicIncarnation(%s) = %d; want 0 for a topic that was not created again", partition, n)
	}
}

// mintedAndFenced: a transport knows its own mint, not another's; its
// token is fenced once a write under it was refused after a rival's mint.
func (s *suite) mintedAndFenced(t *testing.T) {
	first, second := s.target.NewTransport(t), s.target.NewTransport(t)
	a, b := s.extended(t, first), s.extended(t, second)
	role, partition := s.role(t)
	token := s.mint(t, first, role)
	if !a.Minted(token) || b.Minted(token) {
		t.Fatalf("Minted(%s) = %t on the minter, %t on another transport; want true, false", token, a.Minted(token), b.Minted(token))
	}
	if a.Fenced(token) {
		t.Fatalf("Fenced(%s) before any rival", token)
	}
	newer := s.mint(t, second, role)
	key := coordination.EncodeKey(coordination.LeaseKey(role))
	if err := first.WriteLease(s.ctx(t), partition, token, key, lease(t, "a", token)); !errors.Is(err, coordination.ErrFenced) {
		t.Fatalf("WriteLease under %s after the rival minted %s = %v; want an error that wraps ErrFenced", token, newer, err)
	}
	if !a.Fenced(token) || b.Fenced(newer) {
		t.Fatalf("Fenced = %t for the refused %s, %t for the rival's %s; want true, false", a.Fenced(token), token, b.Fenced(newer), newer)
	}
}

// lateMint: a transport reports no late mint of a token it never minted,
// nor of one whose mint it had the answer of (its own AcquireEpoch's);
// AcquireEpochUnless from the coordinator's token mints a token that
// supersedes it, which DescribeEpoch then reports.
func (s *suite) lateMint(t *testing.T) {
	first, second := s.target.NewTransport(t), s.target.NewTransport(t)
	a, b := s.extended(t, first), s.extended(t, second)
	role, _ := s.role(t)
	token := s.mint(t, first, role)
	if minted, pending := b.LateMint(role, token); minted || pending {
		t.Fatalf("LateMint(%s, %s) on a transport that never minted the role = %t, %t; want false, false", role, token, minted, pending)
	}
	if minted, pending := a.LateMint(role, token); minted || pending {
		t.Fatalf("LateMint(%s, %s) on the transport whose AcquireEpoch returned the token = %t, %t; want false, false: a mint that had its answer is no late one", role, token, minted, pending)
	}
	newer, err := b.AcquireEpochUnless(s.ctx(t), role, token)
	if err != nil {
		t.Fatalf("AcquireEpochUnless(%s, %s), the coordinator's token: %v", role, token, err)
	}
	if !newer.Supersedes(token) {
		t.Fatalf("AcquireEpochUnless(%s, %s) = %s; want a token that supersedes it", role, token, newer)
	}
	described, held, err := second.DescribeEpoch(s.ctx(t), role)
	if err != nil || !held || described != newer {
		t.Fatalf("DescribeEpoch after AcquireEpochUnless = %s, %t, %v; want %s, true, nil", described, held, err, newer)
	}
	if !b.Minted(newer) {
		t.Fatalf("Minted(%s) = false on the transport whose AcquireEpochUnless minted it", newer)
	}
}

// lateMintWait bounds the mint whose reply LoseNextMintReply loses.
const lateMintWait = time.Second

// lateMintAfterALostReply, with LoseNextMintReply: an AcquireEpoch whose
// reply is lost fails, the coordinator holds the token it minted all the
// same, and LateMint of the minter reports it minted (pending meanwhile),
// and another transport's nothing.
func (s *suite) lateMintAfterALostReply(t *testing.T) {
	if s.target.LoseNextMintReply == nil {
		t.Log("ConformanceTarget.LoseNextMintReply is nil: no late mint to check")
		return
	}
	transport, other := s.target.NewTransport(t), s.target.NewTransport(t)
	minter, bystander := s.extended(t, transport), s.extended(t, other)
	role, _ := s.role(t)
	before := s.mint(t, other, role)
	s.target.LoseNextMintReply(t, transport, role)
	ctx, cancel := context.WithTimeout(context.Background(), lateMintWait)
	token, err := transport.AcquireEpoch(ctx, role)
	cancel()
	if err == nil {
		t.Fatalf("AcquireEpoch(%s) whose reply was lost = %s, nil; want an error", role, token)
	}
	var late coordination.FencingToken
	s.eventually(t, "the lost mint lands at the coordinator and LateMint reports it minted", func() (bool, string) {
		current, held, err := other.DescribeEpoch(s.ctx(t), role)
		if err != nil || !held || current == before {
			return false, fmt.Sprintf("DescribeEpoch = %s, %t, %v (the token before the lost mint: %s)", current, held, err, before)
		}
		minted, pending := minter.LateMint(role, current)
		if !minted {
			return false, fmt.Sprintf("LateMint(%s, %s) = false, %t", role, current, pending)
		}
		late = current
		return true, ""
	})
	if minted, pending := bystander.LateMint(role, late); minted || pending {
		t.Fatalf("LateMint(%s, %s) on a transport that did not mint it = %t, %t; want false, false", role, late, minted, pending)
	}
}

// acquireEpochUnlessMoved: a rival minted over from. Whatever the target,
// AcquireEpochUnless from the stale token either mints (a token that
// supersedes the rival's, which DescribeEpoch reports: a mint without a
// retry is AcquireEpoch) or returns an error that wraps ErrFenced and mints
// nothing. With StallNextMint, whose mint must retry, it must refuse, and
// from the rival's token (the coordinator's) it must mint.
func (s *suite) acquireEpochUnlessMoved(t *testing.T) {
	holder, rival := s.target.NewTransport(t), s.target.NewTransport(t)
	role, _ := s.role(t)
	from := s.mint(t, holder, role)
	won := s.mint(t, rival, role)
	challenger := s.target.NewTransport(t)
	extended := s.extended(t, challenger)
	if s.target.StallNextMint == nil {
		token, err := extended.AcquireEpochUnless(s.ctx(t), role, from)
		switch {
		case errors.Is(err, coordination.ErrFenced):
			s.holds(t, challenger, role, won, "a refused AcquireEpochUnless")
		case err != nil:
			t.Fatalf("AcquireEpochUnless(%s, %s) after the rival minted %s = %v; want a token or an error that wraps ErrFenced", role, from, won, err)
		case !token.Supersedes(won):
			t.Fatalf("AcquireEpochUnless(%s, %s) after the rival minted %s = %s; want a token that supersedes the rival's", role, from, won, token)
		default:
			s.holds(t, challenger, role, token, "AcquireEpochUnless")
		}
		return
	}
	s.target.StallNextMint(t, challenger, role)
	token, err := extended.AcquireEpochUnless(s.ctx(t), role, from)
	if !errors.Is(err, coordination.ErrFenced) {
		t.Fatalf("AcquireEpochUnless(%s, %s), whose mint waited for the coordinator while the rival's %s was the coordinator's = %s, %v; want an error that wraps ErrFenced and no mint", role, from, won, token, err)
	}
	s.holds(t, challenger, role, won, "a refused AcquireEpochUnless")
	if extended.Minted(won) {
		t.Fatalf("Minted(%s) = true on the challenger; the rival minted it", won)
	}
	s.target.StallNextMint(t, challenger, role)
	token, err = extended.AcquireEpochUnless(s.ctx(t), role, won)
	if err != nil || !token.Supersedes(won) {
		t.Fatalf("AcquireEpochUnless(%s, %s), the coordinator's token, whose mint waited for the coordinator = %s, %v; want a token that supersedes it", role, won, token, err)
	}
	s.holds(t, challenger, role, token, "AcquireEpochUnless from the coordinator's token")
}

// holds fails t unless DescribeEpoch reports token for role after what.
func (s *suite) holds(t *testing.T, transport coordination.Transport, role coordination.Role, token coordination.FencingToken, what string) {
	t.Helper()
	described, held, err := transport.DescribeEpoch(s.ctx(t), role)
	if err != nil || !held || described != token {
		t.Fatalf("DescribeEpoch(%s) after %s = %s, %t, %v; want %s, true, nil", role, what, described, held, err, token)
	}
}
