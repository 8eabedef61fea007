package coordination_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/krabka-io/krabka-streams-go/coordination"
	"github.com/krabka-io/krabka-streams-go/coordination/coordinationtest"
)

// An elector keeps a member competing: it runs the work while the member
// leads, and campaigns again when a leadership ends. Here the work
// dispatches one command and then shuts the elector down, which resigns
// the role. Over Kafka the transport is coordination.NewKafkaTransport.
func ExampleElector() {
	cluster := coordinationtest.NewCluster()
	role, err := coordination.NewRole("controller")
	if err != nil {
		log.Fatal(err)
	}
	me, err := coordination.NewMemberID("node-1")
	if err != nil {
		log.Fatal(err)
	}
	ctx, shutdown := context.WithCancel(context.Background())
	defer shutdown()

	elector, err := coordination.NewElector(cluster.Transport("node-1"), role, me, coordination.ElectorCallbacks{
		OnStartedLeading: func(ctx context.Context, leader *coordination.Leadership) {
			fmt.Printf("leading %s with token %s\n", leader.Role(), leader.Token())
			command := coordination.GuardedRecord{Topic: "commands", Value: []byte("open valve 7"),
				Headers: []coordination.RecordHeader{{Key: "trace-id", Value: []byte("4bf92f35")}}}
			if err := leader.Write(ctx, command); err != nil {
				fmt.Println("write:", err) // ErrFenced: a newer leader exists; ctx ends too
				return
			}
			fmt.Println("dispatched open valve 7")
			shutdown() // a SIGTERM, say
			<-ctx.Done()
		},
		OnStoppedLeading: func(err error) {
			fmt.Printf("stopped leading: resigned %t\n", errors.Is(err, coordination.ErrNotHeld))
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := elector.Run(ctx); err != nil {
		log.Fatal(err) // ErrNotAuthorized, ErrMisconfigured, ErrDuplicateMember
	}
	status, err := coordination.DescribeLeadership(context.Background(), cluster.Transport("auditor"), role)
	if err != nil {
		log.Fatal(err)
	}
	state, err := coordination.DescribeRoleState(context.Background(), cluster.Transport("auditor"), role)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("after Run: lease cleared %t, roster empty %t, %s\n", state.Lease == nil, len(state.Roster) == 0, status)

	// Output:
	// leading controller with token 1000:0
	// dispatched open valve 7
	// stopped leading: resigned true
	// after Run: lease cleared true, roster empty true, role controller: epoch 1000:0
}
