package main

// Roles read from the state topic: the fold of every role that a record
// names (list, describe --all), the epochs of roles, and the errors of a
// role that was never taken, or that members registered for and left.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// roleFold is the state of one role that a scan of the state topic folded,
// with the partition that holds the role.
type roleFold struct {
	role      coordination.Role
	partition coordination.TopicPartition
	state     coordination.RoleState
	skipped   int // records of the role that do not decode
}

// undecodableKeys counts the records of one partition whose key does not
// decode: no role can be folded from them, so a scan skips them and says so.
type undecodableKeys struct {
	partition coordination.TopicPartition
	count     int
	first     error // the error of the first one
}

// warning is the line that list and describe --all print on stderr.
func (u undecodableKeys) warning() string {
	return fmt.Sprintf("skipped %d record(s) of %s whose key does not decode, so no role is shown for them (another writer's records, or a newer layout): %s",
		u.count, u.partition, oneLine(errText(u.first)))
}

// scanRoles reads every partition of the state topic and folds every role
// that a record names, in name order. It costs one read of each partition
// (a ListOffsets and the fetches of its compacted view). A record whose
// key does not decode is skipped, and counted per partition in skipped.
func scanRoles(ctx context.Context, s *session) (folds []roleFold, skipped []undecodableKeys, err error) {
	type partitionResult struct {
		records []coordination.StateRecord
		err     error
	}
	results := make([]partitionResult, s.g.partitions)
	var wg sync.WaitGroup
	for p := range s.g.partitions {
		wg.Go(func() {
			partition := coordination.TopicPartition{Topic: s.g.topic, Partition: p}
			err := retryTransient(ctx, func(ctx context.Context) (err error) {
				results[p].records, err = s.transport.ReadPartition(ctx, partition)
				return err
			})
			results[p].err = err
		})
	}
	wg.Wait()
	byRole := make(map[coordination.Role]*roleFold)
	builders := make(map[coordination.Role]*coordination.RoleStateBuilder)
	for p, result := range results {
		partition := coordination.TopicPartition{Topic: s.g.topic, Partition: p}
		if result.err != nil {
			if isDenied(result.err) {
				return nil, nil, s.deniedError("read "+partition.String(), topicACL(opRead, s.g.topic), result.err)
			}
			return nil, nil, clusterError("read %s: %s", partition, oneLine(errText(result.err)))
		}
		undecodable := undecodableKeys{partition: partition}
		for _, record := range result.records {
			key, err := coordination.DecodeKey(record.Key)
			if err != nil {
				if undecodable.count == 0 {
					undecodable.first = err
				}
				undecodable.count++
				continue
			}
			fold := byRole[key.Role]
			if fold == nil {
				fold = &roleFold{role: key.Role, partition: partition}
				byRole[key.Role] = fold
				builders[key.Role] = coordination.NewRoleStateBuilder(key.Role)
			}
			if err := builders[key.Role].Apply(record); err != nil {
				fold.skipped++
				continue
			}
		}
		if undecodable.count > 0 {
			skipped = append(skipped, undecodable)
		}
	}
	for role, fold := range byRole {
		fold.state = builders[role].Build()
		folds = append(folds, *fold)
	}
	slices.SortFunc(folds, func(a, b roleFold) int { return strings.Compare(a.role.String(), b.role.String()) })
	return folds, skipped, nil
}

// describeEpochs asks the transaction coordinator for the epoch of every
// role, eight at a time. A role whose describe failed has the error in errs.
func describeEpochs(ctx context.Context, s *session, roles []coordination.Role) (statuses []coordination.LeadershipStatus, errs []error) {
	statuses = make([]coordination.LeadershipStatus, len(roles))
	errs = make([]error, len(roles))
	limit := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i, role := range roles {
		wg.Go(func() {
			limit <- struct{}{}
			defer func() { <-limit }()
			errs[i] = retryTransient(ctx, func(ctx context.Context) (err error) {
				statuses[i], err = coordination.DescribeLeadership(ctx, s.transport, role)
				return err
			})
		})
	}
	wg.Wait()
	return statuses, errs
}

// epochError explains a failed describe of a role's epoch.
func (s *session) epochError(role coordination.Role, err error) error {
	if isDenied(err) {
		return s.deniedError("describe the epoch of role "+showName(role.String())+" (DescribeTransactions)", roleACL(opDescribe, role), err)
	}
	return clusterError("describe the epoch of role %s at the transaction coordinator: %s", showName(role.String()), oneLine(errText(err)))
}

// roleTrace is what the records of the state topic say of a role that has
// no epoch, no lease and no member now.
type roleTrace int

const (
	// traceNone: no record names the role (never seen; a typo most likely).
	traceNone roleTrace = iota
	// traceRegistered: members registered and left (a registration
	// tombstone), and no lease record: none took the role, none minted an
	// epoch. list shows it.
	traceRegistered
	// traceLeased: a lease record names the role (its tombstone): it was
	// taken before, and its transactional id expired since.
	traceLeased
)

// traceRole reads the role's partition of the state topic (a ListOffsets
// and the fetches of its compacted view) for the records that name it.
func traceRole(ctx context.Context, s *session, role coordination.Role) (roleTrace, error) {
	partition, err := coordination.RoleTopicPartition(role, s.g.coordOptions()...)
	if err != nil {
		return traceNone, usageError("%v", err)
	}
	var records []coordination.StateRecord
	err = retryTransient(ctx, func(ctx context.Context) (err error) {
		records, err = s.transport.ReadPartition(ctx, partition)
		return err
	})
	if err != nil {
		if isDenied(err) {
			return traceNone, s.deniedError("read "+partition.String(), topicACL(opRead, s.g.topic), err)
		}
		return traceNone, clusterError("read %s: %s", partition, oneLine(errText(err)))
	}
	trace := traceNone
	for _, record := range records {
		key, err := coordination.DecodeKey(record.Key)
		if err != nil || key.Role != role {
			continue
		}
		if key.Kind == coordination.KindLease {
			return traceLeased, nil
		}
		trace = traceRegistered
	}
	return trace, nil
}

// fenceIdleRoleError is the refusal of fence without --force for a role
// that has no epoch, no lease and no member, by what its records say.
func fenceIdleRoleError(ctx context.Context, s *session, role coordination.Role) error {
	trace, err := traceRole(ctx, s, role)
	if err != nil {
		return err
	}
	hint := "check the name, or pass --force to mint its first epoch"
	if trace != traceNone {
		hint = "there is no holder to fence; pass --force to mint an epoch"
	}
	return idleRoleError(role.String(), trace, hint)
}

// idleRoleError is the error of a command that needs a role taken or
// joined (fence without --force) for a role that has no epoch, no lease
// and no member, by what its records say; hint ends the line.
func idleRoleError(role string, trace roleTrace, hint string) error {
	switch trace {
	case traceRegistered:
		return usageError("role %s was registered, never taken: no member has minted an epoch, and none is in the roster now; %s", showName(role), hint)
	case traceLeased:
		return usageError("role %s has no epoch, no lease and no members: it was taken before, and its transactional id expired; %s", showName(role), hint)
	}
	return usageError("role %s has never been taken and has no members: no record of the state topic names it; %s", showName(role), hint)
}

// neverSeen is the error of describe for roles that have no epoch, no
// lease and no member, and that no record of the state topic names: most
// likely a typo.
func neverSeen(roles []string) error {
	quoted := make([]string, len(roles))
	for i, r := range roles {
		quoted[i] = showName(r)
	}
	what := "role " + quoted[0] + " has never been taken and has no members: no record of the state topic names it"
	if len(roles) > 1 {
		what = "roles " + strings.Join(quoted, ", ") + " have never been taken and have no members: no record of the state topic names them"
	}
	return usageError("%s; check the name ('krabka-coord list' shows the roles of the state topic)", what)
}

// fmtCount writes "1 standby", "2 standbys".
func fmtCount(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", one)
	}
	return fmt.Sprintf("%d %s", n, many)
}
