package coordination

import (
	"context"
	"errors"
	"fmt"
)

// LeadershipStatus reports the token that the transaction coordinator holds
// for one role. [DescribeLeadership] builds it.
type LeadershipStatus struct {
	// Role is the role that the status describes.
	Role Role

	// Token is the token that the transaction coordinator holds now. It is
	// [NoEpoch] when no member has ever taken the role.
	Token FencingToken

	// Held reports whether a member has taken the role.
	Held bool
}

// Authoritative reports whether the token is the token that the coordinator
// holds now. A third party checks the authority of a writer with this one
// question, and it joins no group. No token is authoritative for a role that
// no member holds, [NoEpoch] included.
//
// The answer is as old as the DescribeTransactions response behind it: a
// mint that lands after it makes the answer stale. Only the broker's refusal
// of a write is current, so a writer proves its authority by writing, and a
// third party uses this check to audit, not to grant.
func (s LeadershipStatus) Authoritative(token FencingToken) bool {
	return s.Held && token == s.Token
}

// String describes the status: "role controller: epoch 4242:7", or "role
// controller: no epoch" for a role that no member has taken.
func (s LeadershipStatus) String() string {
	if !s.Held {
		return fmt.Sprintf("role %s: no epoch", s.Role)
	}
	return fmt.Sprintf("role %s: epoch %s", s.Role, s.Token)
}

// DescribeLeadership reports which token holds a role now.
//
// The call reaches the transaction coordinator only. It reads no topic, it
// joins no group, and it takes no epoch, so any process makes it. This is the
// third-party check of the authority of a writer. Over Kafka it is one
// DescribeTransactions request, and it needs DESCRIBE on the transactional
// id of the role. It returns the coordinator's error wrapped with the role,
// and an error for a nil coordinator or the zero [Role].
func DescribeLeadership(ctx context.Context, coordinator Coordinator, role Role) (LeadershipStatus, error) {
	if coordinator == nil {
		return LeadershipStatus{}, errors.New("coordination: DescribeLeadership: nil Coordinator")
	}
	if role.IsZero() {
		return LeadershipStatus{}, errors.New("coordination: DescribeLeadership: the zero Role: build the role with NewRole")
	}
	token, held, err := coordinator.DescribeEpoch(ctx, role)
	if err != nil {
		return LeadershipStatus{}, wrapf(err, nil, "describe the epoch of role %s", role)
	}
	if !held {
		token = NoEpoch
	}
	return LeadershipStatus{Role: role, Token: token, Held: held}, nil
}

// DescribeRoleState reads the partition of one role and folds it into the
// roster and the lease of that role. A tool that reports the state of a
// cluster calls it, and it takes no epoch. Only [WithTopic] and
// [WithPartitions] change what it reads.
//
// It returns the reader's error, and an error for an invalid option or the
// zero [Role]. A record that does not decode does not hide the others: the
// call returns the state of every well-formed record together with an error
// that wraps the first *[FormatError] and names its offset.
func DescribeRoleState(ctx context.Context, reader StateReader, role Role, options ...Option) (RoleState, error) {
	if reader == nil {
		return RoleState{}, errors.New("coordination: DescribeRoleState: nil StateReader")
	}
	s, err := placementSettings(options)
	if err != nil {
		return RoleState{}, err
	}
	if role.IsZero() {
		return RoleState{}, errors.New("coordination: DescribeRoleState: the zero Role: build the role with NewRole")
	}
	partition, err := s.partition(role)
	if err != nil {
		return RoleState{}, err
	}
	// A follower's compacted view folds to the same state as the whole log
	// and costs no walk of it.
	var records []StateRecord
	extended, _ := extensionsOf(reader)
	if follower := followerOfRole(extended, partition, role); follower != nil {
		records, _, err = follower.ReadPartitionFrom(ctx, partition, 0)
	} else {
		records, err = reader.ReadPartition(ctx, partition)
	}
	if err != nil {
		return RoleState{}, wrapf(err, nil, "read %s for role %s", partition, role)
	}
	return BuildRoleState(role, records)
}
