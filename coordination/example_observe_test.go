package coordination_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log"

	"github.com/krabka-io/krabka-streams-go/coordination"
	"github.com/krabka-io/krabka-streams-go/coordination/coordinationtest"
)

// Observe follows a role without campaigning. Here it sees node-1 take the
// role, and node-2 try it once with TryAcquire, which registers, finds the
// role held, and leaves the roster again.
func ExampleObserve() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cluster := coordinationtest.NewCluster()
	role, err := coordination.NewRole("controller")
	if err != nil {
		log.Fatal(err)
	}
	node1, err := coordination.NewMemberID("node-1")
	if err != nil {
		log.Fatal(err)
	}
	node2, err := coordination.NewMemberID("node-2")
	if err != nil {
		log.Fatal(err)
	}

	// A loop `for change, err := range coordination.Observe(...)` is the
	// usual form; the example steps the iterator to interleave the members.
	next, stop := iter.Pull2(coordination.Observe(ctx, cluster.Transport("observer"), []coordination.Role{role}))
	defer stop()
	show := func(n int) {
		for range n {
			change, err, _ := next()
			if err != nil {
				log.Fatal(err)
			}
			line := change.Kind.String()
			if !change.Member.IsZero() {
				line = fmt.Sprintf("%-12s %s", change.Kind, change.Member)
			}
			fmt.Print(line)
			if lease := change.State.Lease; lease != nil && change.Kind == coordination.ChangeGranted {
				fmt.Printf(" with token %s", lease.Token)
			}
			fmt.Println()
		}
	}
	show(2) // the state (no holder yet), and synced: what follows is live

	leader, err := coordination.AcquireLeadership(ctx, cluster.Transport("node-1"), role, node1)
	if err != nil {
		log.Fatal(err)
	}
	show(2)

	_, err = coordination.TryAcquire(ctx, cluster.Transport("node-2"), role, node2)
	var turn *coordination.TurnError
	if errors.As(err, &turn) {
		fmt.Printf("TryAcquire: not node-2's turn: held by %s, retry %d ms after the grant\n",
			turn.Lease.Member, turn.RetryAt-turn.Lease.GrantedAt)
	}
	show(2)

	if err := leader.Resign(ctx); err != nil {
		log.Fatal(err)
	}

	// Output:
	// state
	// synced
	// registered   node-1
	// granted      node-1 with token 1000:0
	// TryAcquire: not node-2's turn: held by node-1, retry 30000 ms after the grant
	// registered   node-2
	// deregistered node-2
}
