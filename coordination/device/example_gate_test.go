package device_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/krabka-io/krabka-streams-go/coordination"
	"github.com/krabka-io/krabka-streams-go/coordination/coordinationtest"
	"github.com/krabka-io/krabka-streams-go/coordination/device"
)

// valve is a fake device: it acts on a command only when the gate admits
// the token of the batch that carried it.
type valve struct {
	gate *device.Gate
}

func (v *valve) dispatch(ctx context.Context, command device.Command) {
	err := v.gate.Admit(ctx, command.Token)
	var refused *device.FencedTokenError
	switch {
	case err == nil:
		fmt.Printf("valve: %s (token %s, trace %s)\n", command.Value, command.Token, command.Headers[0].Value)
	case errors.As(err, &refused):
		fmt.Printf("valve: refused %q from %s: the coordinator holds %s\n", command.Value, refused.Token, refused.Current)
	default:
		fmt.Println("valve: cannot tell, not acting:", err) // fail closed
	}
}

// The device side of fencing. Two leaders write commands in turn, to two
// partitions; the device reads the successor's partition first, so the
// deposed leader's command reaches it last, as a straggler. The gate
// admits only the token that the coordinator holds now. Ranking tokens
// would not do: after a coordinator moves, a successor's token can rank
// below the deposed one's. Over Kafka the device reads with a
// device.KafkaCommandReader, whose Commands carry the token of each
// record batch; here the in-memory cluster's entries carry it.
func ExampleGate() {
	ctx := context.Background()
	cluster := coordinationtest.NewCluster()
	role, err := coordination.NewRole("controller")
	if err != nil {
		log.Fatal(err)
	}
	lead := func(member string, partition int, value string) *coordination.Leadership {
		id, err := coordination.NewMemberID(member)
		if err != nil {
			log.Fatal(err)
		}
		leader, err := coordination.AcquireLeadership(ctx, cluster.Transport(member), role, id)
		if err != nil {
			log.Fatal(err)
		}
		err = leader.Write(ctx, coordination.GuardedRecord{Topic: "commands", Partition: partition, Value: []byte(value),
			Headers: []coordination.RecordHeader{{Key: "trace-id", Value: []byte(member)}}})
		if err != nil {
			log.Fatal(err)
		}
		return leader
	}

	deposed := lead("node-1", 0, "open valve 7")
	// node-1 hangs; node-2 takes over (an operator's fence here: a new epoch,
	// the lease and node-1's registration cleared, so no deadline to wait).
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
	if err := operator.Append(ctx, partition, coordination.EncodeKey(coordination.RegistrationKey(role, deposed.Member())), nil); err != nil {
		log.Fatal(err)
	}
	successor := lead("node-2", 1, "close valve 7")

	gate, err := device.NewGate(cluster.Transport("device"), role)
	if err != nil {
		log.Fatal(err)
	}
	v := &valve{gate: gate}
	for _, p := range []int{1, 0} {
		for _, entry := range cluster.Entries(coordination.TopicPartition{Topic: "commands", Partition: p}) {
			v.dispatch(ctx, device.Command{Topic: "commands", Partition: p, Offset: entry.Offset,
				Value: entry.Value, Headers: entry.Headers, Token: entry.Token})
		}
	}
	if err := successor.Resign(ctx); err != nil {
		log.Fatal(err)
	}
	// The deposed leader learns of the fence at its next renewal, or, as
	// here, when it resigns: the broker refuses its epoch, and its
	// leadership ends with ErrFenced.
	err = deposed.Resign(ctx)
	fmt.Printf("the deposed leader's resignation is fenced: %t\n", errors.Is(err, coordination.ErrFenced))

	// Output:
	// valve: close valve 7 (token 1000:2, trace node-2)
	// valve: refused "open valve 7" from 1000:0: the coordinator holds 1000:2
	// the deposed leader's resignation is fenced: true
}
