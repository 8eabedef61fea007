package coordinationtest_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/krabka-io/krabka-streams-go/coordination"
	"github.com/krabka-io/krabka-streams-go/coordination/coordinationtest"
)

// Two members mint the epoch of one role in turn. The cluster then refuses
// the guarded write of the first, and only the write of the second reaches
// the topic.
func ExampleCluster() {
	ctx := context.Background()
	role, err := coordination.NewRole("controller")
	if err != nil {
		log.Fatal(err)
	}
	cluster := coordinationtest.NewCluster()
	node1, node2 := cluster.Transport("node-1"), cluster.Transport("node-2")

	old, err := node1.AcquireEpoch(ctx, role)
	if err != nil {
		log.Fatal(err)
	}
	current, err := node2.AcquireEpoch(ctx, role)
	if err != nil {
		log.Fatal(err)
	}
	command := []coordination.GuardedRecord{{Topic: "commands", Value: []byte("open valve")}}
	err = node1.WriteGuarded(ctx, old, command)
	fmt.Printf("node-1 writes under %s: fenced %t\n", old, errors.Is(err, coordination.ErrFenced))
	err = node2.WriteGuarded(ctx, current, command)
	fmt.Printf("node-2 writes under %s: %v\n", current, err)

	for _, entry := range cluster.Entries(coordination.TopicPartition{Topic: "commands"}) {
		fmt.Printf("commands-0 offset %d: %q by %s under %s\n", entry.Offset, entry.Value, entry.Writer, entry.Token)
	}
	// Output:
	// node-1 writes under 1000:0: fenced true
	// node-2 writes under 1000:1: <nil>
	// commands-0 offset 0: "open valve" by node-2 under 1000:1
}

// A member that is cut off from the cluster fails every call with
// ErrUnreachable, which is not a fence: after the heal it still holds its
// epoch.
func ExampleTransport_Cut() {
	ctx := context.Background()
	role, err := coordination.NewRole("controller")
	if err != nil {
		log.Fatal(err)
	}
	cluster := coordinationtest.NewCluster()
	node1 := cluster.Transport("node-1")
	token, err := node1.AcquireEpoch(ctx, role)
	if err != nil {
		log.Fatal(err)
	}
	command := []coordination.GuardedRecord{{Topic: "commands", Value: []byte("open valve")}}

	node1.Cut()
	err = node1.WriteGuarded(ctx, token, command)
	fmt.Printf("cut: unreachable %t, fenced %t\n", errors.Is(err, coordinationtest.ErrUnreachable), errors.Is(err, coordination.ErrFenced))
	node1.Heal()
	fmt.Printf("healed: %v\n", node1.WriteGuarded(ctx, token, command))
	fmt.Printf("WriteGuarded calls: %d\n", node1.Calls(coordinationtest.OpWriteGuarded))
	// Output:
	// cut: unreachable true, fenced false
	// healed: <nil>
	// WriteGuarded calls: 2
}
