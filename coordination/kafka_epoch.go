package coordination

import (
	"context"
	"errors"

	"github.com/krabka-io/krabka-streams-go/coordination/internal/kafkawire"
)

// This file holds the epochs of KafkaTransport: AcquireEpoch mints one
// (kafkawire's Wire.Mint: a raw InitProducerId with transactional.id = the
// role and the lease duration as transaction timeout), DescribeEpoch reads
// the coordinator's pair, and Minted and Fenced answer from the epochs that
// the transport minted.

// AcquireEpoch mints a new epoch of the role and fences every earlier one,
// this transport's own included. It ends the producer of the role's
// previous mint in this transport, and sends InitProducerId with
// transactional.id = the role name and the lease duration as transaction
// timeout to the role's transaction coordinator, so every call mints: the
// coordinator bumps the epoch of the id, or allocates a new producer id
// when the epoch is exhausted, and aborts an open transaction of the
// previous holder. The request goes through the transactional client that
// every role of the transport shares.
//
// It retries CONCURRENT_TRANSACTIONS, COORDINATOR_LOAD_IN_PROGRESS,
// NOT_COORDINATOR and connection errors until ctx ends, and then returns the
// context's error; an InitProducerId written without an answer goes again
// only once no copy of it can land (the package doc, "Extensions and
// errata"). It returns a permanent error for a missing ACL (WRITE on the
// TransactionalId) and for a lease duration above the broker's
// transaction.max.timeout.ms, and one that wraps [ErrMisconfigured] for a
// cluster that cannot serve the requests of a transaction at the versions
// the transport sends them ([KafkaTransport.CheckStateTopic]).
// Concurrent calls for one role run one after the other.
func (t *KafkaTransport) AcquireEpoch(ctx context.Context, role Role) (FencingToken, error) {
	if role.IsZero() {
		return NoEpoch, errors.New("coordination: AcquireEpoch: the zero Role has no transactional id")
	}
	op := "AcquireEpoch of role " + role.String()
	if err := t.wire.CheckVersions(ctx, op); err != nil {
		return NoEpoch, kafkaError(err) // no mint on a cluster that cannot serve the epoch's requests
	}
	epoch, err := t.wire.Mint(ctx, role.String(), op)
	if err != nil {
		return NoEpoch, kafkaError(err)
	}
	return tokenOf(epoch.Producer()), nil
}

// DescribeEpoch reports the producer id and epoch that the transaction
// coordinator holds for the transactional id of the role, with one
// DescribeTransactions request. It joins no group and takes no epoch.
//
// It returns [NoEpoch] and false, with no error, for a transactional id that
// the coordinator does not know (never used, or expired after
// transactional.id.expiration.ms), that is Dead, or that carries a negative
// id or epoch. It returns a permanent error for a missing DESCRIBE ACL on
// the TransactionalId.
func (t *KafkaTransport) DescribeEpoch(ctx context.Context, role Role) (FencingToken, bool, error) {
	if role.IsZero() {
		return NoEpoch, false, errors.New("coordination: DescribeEpoch: the zero Role has no transactional id")
	}
	producer, held, err := t.wire.DescribeEpoch(ctx, role.String(), "DescribeEpoch of role "+role.String())
	if err != nil || !held {
		return NoEpoch, false, kafkaError(err)
	}
	return tokenOf(producer), true, nil
}

// LateMint reports whether a mint attempt of the role that gave up before
// the coordinator answered minted token after all (minted), or is still
// waiting for its answer (pending), for [ExtendedTransport]: the next
// AcquireEpoch takes such a token instead of minting again while the
// coordinator still holds it. It sends no request, and is safe for
// concurrent use.
func (t *KafkaTransport) LateMint(role Role, token FencingToken) (minted, pending bool) {
	return t.wire.LateMint(role.String(), producerOf(token))
}

// AcquireEpochUnless is AcquireEpoch, for [ExtendedTransport], except that
// once another producer minted after from was the coordinator's pair, the
// mint sends no InitProducerId again and returns an error that wraps
// [ErrFenced]. It is safe for concurrent use.
func (t *KafkaTransport) AcquireEpochUnless(ctx context.Context, role Role, from FencingToken) (FencingToken, error) {
	if role.IsZero() {
		return NoEpoch, errors.New("coordination: AcquireEpoch: the zero Role has no transactional id")
	}
	epoch, err := t.wire.MintUnlessMoved(ctx, role.String(), "AcquireEpoch of role "+role.String(), producerOf(from))
	if err != nil {
		return NoEpoch, kafkaError(err)
	}
	return tokenOf(epoch.Producer()), nil
}

// Minted reports whether this transport minted token, for
// [ExtendedTransport]. It is safe for concurrent use.
func (t *KafkaTransport) Minted(token FencingToken) bool {
	return t.wire.Epoch(producerOf(token)) != nil
}

// Fenced reports whether this transport minted token and the cluster
// refused a write under it as fenced (or this transport minted a newer
// epoch of its role), for [ExtendedTransport]. It is safe for concurrent
// use.
func (t *KafkaTransport) Fenced(token FencingToken) bool {
	epoch := t.wire.Epoch(producerOf(token))
	return epoch != nil && epoch.Fenced()
}

// epochOf returns the epoch that minted token, or an error that wraps
// ErrFenced for a token this transport did not mint, and ErrProducerLost
// on a closed transport. what names the write.
func (t *KafkaTransport) epochOf(what string, token FencingToken) (*kafkawire.Epoch, error) {
	if t.isClosed() {
		return nil, kafkaError(&kafkawire.Error{Op: what + " under " + token.String(), Class: kafkawire.Closed, Ended: true})
	}
	epoch := t.wire.Epoch(producerOf(token))
	if epoch == nil {
		return nil, kafkaError(&kafkawire.Error{Op: what + " under " + token.String(), Class: kafkawire.Fenced,
			Detail: errors.New("this transport did not mint the token, and writes only under its own")})
	}
	return epoch, nil
}
