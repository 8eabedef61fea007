package main

// The command fence: a forced failover. It mints a new epoch for the
// role, which fences the holder, and clears the holder's lease and
// registration.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

func newFenceCommand(g *globals) *cobra.Command {
	var keepLease, force bool
	cmd := &cobra.Command{
		Use:   "fence ROLE",
		Short: "Forced failover: mint a new epoch so that the holder's next write is refused",
		Long: `fence mints a new epoch for ROLE at the transaction coordinator
(InitProducerId on the role's transactional id, as Kafka's fenceProducers
does), so the broker refuses every later write of the current holder: its
next renewal fails, it learns that it lost the role, and it stops (elect and
run exit 3). fence prints the old and the new token.

Then, unless --keep-lease, it clears the lease under the new epoch and
takes the deposed holder out of the roster, so the first standby takes over
at once instead of at the lease's deadline; the holder joins at the tail if
it competes again. fence itself never holds the role: it writes no lease of
its own.

A mint whose every answer is an error until its 30 s bound (such as
CONCURRENT_TRANSACTIONS while the coordinator aborts the holder's open
transaction), or that gets no answer at all, may still have landed: fence
then asks the coordinator which token it holds (DescribeTransactions). A
token newer than the one before means the holder is fenced: fence prints it
as the new token and exits 0, but leaves the lease (it cannot write under a
token it got no answer for), so the standbys take over at its deadline.
Otherwise it exits 4 and names the token that the coordinator still holds.

A role that has never been taken and has no members (no epoch at the
coordinator, no lease, an empty roster) is most likely a typo: fence refuses
it and exits 2, unless --force, which mints the role's first epoch.`,
		Example: `  krabka-coord fence controller --brokers 127.0.0.1:9092
  krabka-coord fence controller --keep-lease --output json   # standbys wait for the deadline`,
		Args: exactArgs("ROLE"),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			return g.onRoles(cmd, args, func(ctx context.Context, s *session, roles []coordination.Role) error {
				result, err := fenceRole(ctx, s, roles[0], !keepLease, force)
				if err != nil {
					return err
				}
				if g.json() {
					return writeJSON(g.stdout, result)
				}
				printFence(g, result)
				return nil
			})
		}),
	}
	cmd.Flags().BoolVar(&force, "force", false, "fence a role that has never been taken and has no members: mint its first epoch")
	cmd.Flags().BoolVar(&keepLease, "keep-lease", false, "only mint the epoch; leave the lease and the roster, so the standbys wait for the lease's deadline")
	return cmd
}

// fenceJSON is the result of fence. See json.md.
type fenceJSON struct {
	Role      string     `json:"role"`
	Topic     string     `json:"topic"`
	Partition int        `json:"partition"`
	OldToken  *tokenJSON `json:"old_token"`
	NewToken  *tokenJSON `json:"new_token"`

	// Holder is the member that the lease named, and "" without a lease;
	// LeaseToken is the lease's token, null without a lease.
	Holder     string     `json:"holder"`
	LeaseToken *tokenJSON `json:"lease_token"`

	// LeaseReleased: fence cleared the lease, and HolderRemoved: it took
	// the holder's registration out of the roster, so the first standby,
	// Next ("" for none), takes over at once.
	LeaseReleased bool   `json:"lease_released"`
	HolderRemoved bool   `json:"holder_removed"`
	Next          string `json:"next"`
}

// fenceRole mints a new epoch of the role and, with release, clears its
// lease. Without force it refuses a role that has no epoch, no lease and no
// member: a mistyped name would get a transactional id of its own.
func fenceRole(ctx context.Context, s *session, role coordination.Role, release, force bool) (fenceJSON, error) {
	g, transport := s.g, s.transport
	partition, _ := coordination.RoleTopicPartition(role, g.coordOptions()...)
	result := fenceJSON{Role: role.String(), Topic: partition.Topic, Partition: partition.Partition}
	var before coordination.LeadershipStatus
	err := retryTransient(ctx, func(ctx context.Context) (err error) {
		before, err = coordination.DescribeLeadership(ctx, transport, role)
		return err
	})
	if err != nil {
		if interruptedBy(ctx) {
			return result, interruptedError("before fence minted an epoch")
		}
		if isDenied(err) {
			// fence needs WRITE on the transactional id, which implies the
			// DESCRIBE of DescribeTransactions.
			return result, s.deniedError("describe the epoch of role "+showName(role.String()), roleACL(opWrite, role), err)
		}
		return result, s.epochError(role, err)
	}
	if before.Held {
		result.OldToken = newTokenJSON(before.Token)
	}
	var state coordination.RoleState
	err = retryTransient(ctx, func(ctx context.Context) (err error) {
		state, err = coordination.DescribeRoleState(ctx, transport, role, g.coordOptions()...)
		return err
	})
	var format *coordination.FormatError
	if err != nil && !errors.As(err, &format) {
		if interruptedBy(ctx) {
			return result, interruptedError("before fence minted an epoch")
		}
		if isDenied(err) {
			return result, s.deniedError("read "+partition.String(), topicACL(opRead, g.topic), err)
		}
		return result, clusterError("read %s: %s", partition, oneLine(errText(err)))
	}
	if !force && !before.Held && state.Lease == nil && len(state.Roster) == 0 {
		return result, fenceIdleRoleError(ctx, s, role)
	}
	if interruptedBy(ctx) {
		return result, interruptedError("before fence minted an epoch")
	}
	// From the mint on, fence finishes its writes: a signal now would
	// leave the lease of a deposed holder for the standbys to wait out.
	ctx = context.WithoutCancel(ctx)
	bound := requestTimeout
	if g.mintBound > 0 {
		bound = g.mintBound
	}
	mintCtx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	if state.Lease != nil {
		result.Holder, result.LeaseToken = state.Lease.Member.String(), newTokenJSON(state.Lease.Token)
	}
	token, err := transport.AcquireEpoch(mintCtx, role)
	if err != nil {
		if isDenied(err) {
			return result, s.deniedError("mint a new epoch of role "+showName(role.String())+" (InitProducerId)", roleACL(opWrite, role), err)
		}
		return result, mintUnanswered(ctx, g, transport, role, before, &result, err)
	}
	ctx, cancel = context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	result.NewToken = newTokenJSON(token)
	if release && state.Lease != nil {
		holder := state.Lease.Member
		if err := transport.WriteLease(ctx, partition, token, coordination.EncodeKey(coordination.LeaseKey(role)), nil); err != nil {
			hint := ""
			if isDenied(err) {
				need := topicACL(opWrite, g.topic)
				hint = fmt.Sprintf("; %s lacks %s: grant it with: %s", g.principal(), need, need.grantCommand(g.principal(), s.brokers[0]))
			}
			fmt.Fprintf(g.stderr, "krabka-coord: warning: the epoch is minted, but the lease was not cleared (%s); the standbys take over at its deadline%s\n",
				oneLine(errText(err)), hint)
			return result, nil
		}
		result.LeaseReleased = true
		// Without a lease the roster order alone ranks the members, and the
		// deposed holder, still registered, would rank first: the standbys
		// would wait a challenge stagger, or until it noticed the fence.
		// A registration needs no epoch, so fence removes it; the holder
		// joins at the tail if it competes again.
		if _, registered := state.Entry(holder); registered {
			if err := transport.Append(ctx, partition, coordination.EncodeKey(coordination.RegistrationKey(role, holder)), nil); err != nil {
				fmt.Fprintf(g.stderr, "krabka-coord: warning: the lease is cleared, but %s is still registered (%s); the standbys take over once it leaves\n",
					showName(holder.String()), oneLine(errText(err)))
			} else {
				result.HolderRemoved = true
			}
		}
		for _, entry := range state.Roster {
			if entry.Member != holder {
				result.Next = entry.Member.String()
				break
			}
		}
	}
	return result, nil
}

// fenceDescribeBound bounds the question to the coordinator after a mint
// that got no answer.
const fenceDescribeBound = 10 * time.Second

// mintUnanswered decides the outcome of a mint that failed with err (every
// answer an error such as CONCURRENT_TRANSACTIONS until its bound ended,
// or none): fence asks the coordinator which token it holds now
// (DescribeTransactions). A token that supersedes the one before the mint
// means the mint landed, or a later one did: the holder's token is fenced
// either way, and fence succeeds with that token as the new one, warning
// that it cannot clear the lease under a token whose answer it never got.
// Otherwise the error says what the coordinator holds.
func mintUnanswered(ctx context.Context, g *globals, transport *coordination.KafkaTransport, role coordination.Role,
	before coordination.LeadershipStatus, result *fenceJSON, err error) error {
	describeCtx, cancel := context.WithTimeout(ctx, fenceDescribeBound)
	defer cancel()
	var now coordination.LeadershipStatus
	derr := retryTransient(describeCtx, func(ctx context.Context) (err error) {
		now, err = coordination.DescribeLeadership(ctx, transport, role)
		return err
	})
	name := showName(role.String())
	switch {
	case derr != nil:
		return clusterError("mint a new epoch of role %s: %s; and the question which token the coordinator holds now failed too (%s): "+
			"the holder may or may not be fenced; run 'krabka-coord describe' for the role to see", name, oneLine(errText(err)), oneLine(errText(derr)))
	case now.Held && (!before.Held || now.Token.Supersedes(before.Token)):
		result.NewToken = newTokenJSON(now.Token)
		fmt.Fprintf(g.stderr, "krabka-coord: warning: the mint of role %s got no answer (%s), but the coordinator moved to token %s: "+
			"every writer under an older token is refused; fence cannot clear the lease under a token it got no answer for, so the standbys take over at its deadline\n",
			name, oneLine(errText(err)), now.Token)
		return nil
	case now.Held:
		return clusterError("mint a new epoch of role %s: %s; the coordinator still holds token %s: the holder is not fenced",
			name, oneLine(errText(err)), now.Token)
	}
	return clusterError("mint a new epoch of role %s: %s; the coordinator holds no epoch of the role: nothing is fenced", name, oneLine(errText(err)))
}

func printFence(g *globals, r fenceJSON) {
	old := "none"
	if r.OldToken != nil {
		old = r.OldToken.Token
	}
	fmt.Fprintf(g.stdout, "fenced role %s: token %s -> %s\n", showName(r.Role), old, r.NewToken.Token)
	if r.Holder != "" {
		fmt.Fprintf(g.stdout, "  holder %s (lease token %s) is refused by the broker on its next write\n", showName(r.Holder), tokenText(r.LeaseToken))
	} else {
		fmt.Fprintf(g.stdout, "  no lease: no member held the role; every writer under an older token is refused\n")
	}
	switch {
	case r.LeaseReleased && r.Next != "" && r.HolderRemoved:
		fmt.Fprintf(g.stdout, "  lease cleared and %s out of the roster: %s is first in the roster; it takes over at once if it is alive\n", showName(r.Holder), showName(r.Next))
	case r.LeaseReleased && r.Next != "":
		fmt.Fprintf(g.stdout, "  lease cleared: %s is first in the roster after %s; it takes over once %s leaves the roster, if it is alive\n", showName(r.Next), showName(r.Holder), showName(r.Holder))
	case r.LeaseReleased:
		fmt.Fprintf(g.stdout, "  lease cleared: no standby is registered; the next member to campaign takes the role\n")
	case r.Holder != "":
		fmt.Fprintf(g.stdout, "  lease kept: the standbys take over at its deadline\n")
	}
}
