package coordination_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/krabka-io/krabka-streams-go/coordination"
	"github.com/krabka-io/krabka-streams-go/coordination/coordinationtest"
)

// A member takes a role, dispatches a command under its epoch, and loses the
// role to a standby: the broker, here the in-memory cluster of package
// coordinationtest, refuses the deposed leader's next command. Over Kafka the
// transport is coordination.NewKafkaTransport, and nothing else changes.
func ExampleAcquireLeadership() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
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

	leader, err := coordination.AcquireLeadership(ctx, cluster.Transport("node-1"), role, node1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s leads %s with token %s\n", leader.Member(), leader.Role(), leader.Token())
	command := coordination.GuardedRecord{Topic: "commands", Value: []byte("open valve 7")}
	if err := leader.Write(ctx, command); err != nil {
		log.Fatal(err)
	}

	// An operator's forced failover, as `krabka-coord fence` does: a newer
	// epoch of the role fences the leader, and the operator clears the lease
	// and the leader's registration, so that a standby need not wait for the
	// deadline.
	operator := cluster.Transport("operator")
	token, err := operator.AcquireEpoch(ctx, role)
	if err != nil {
		log.Fatal(err)
	}
	partition, err := coordination.RoleTopicPartition(role)
	if err != nil {
		log.Fatal(err)
	}
	if err := operator.WriteLease(ctx, partition, token, coordination.EncodeKey(coordination.LeaseKey(role)), nil); err != nil {
		log.Fatal(err)
	}
	if err := operator.Append(ctx, partition, coordination.EncodeKey(coordination.RegistrationKey(role, node1)), nil); err != nil {
		log.Fatal(err)
	}
	err = leader.Write(ctx, command)
	fmt.Printf("the deposed leader's write is refused: %t\n", errors.Is(err, coordination.ErrFenced))
	<-leader.Done()
	fmt.Printf("its leadership ended: %t\n", errors.Is(leader.Err(), coordination.ErrFenced))

	// A standby competes, and wins with a newer token.
	successor, err := coordination.AcquireLeadership(ctx, cluster.Transport("node-2"), role, node2)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s leads with token %s, which supersedes %s: %t\n",
		successor.Member(), successor.Token(), leader.Token(), successor.Token().Supersedes(leader.Token()))
	if err := successor.Resign(ctx); err != nil {
		log.Fatal(err)
	}

	// Output:
	// node-1 leads controller with token 1000:0
	// the deposed leader's write is refused: true
	// its leadership ended: true
	// node-2 leads with token 1000:2, which supersedes 1000:0: true
}
