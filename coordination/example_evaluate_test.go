package coordination_test

import (
	"fmt"
	"log"
	"time"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// The succession rules decide when a member calls InitProducerId. They never
// decide who is authoritative, because the transaction coordinator decides
// that.
func ExampleEvaluate() {
	role, err := coordination.NewRole("controller")
	if err != nil {
		log.Fatal(err)
	}
	config, err := coordination.NewLeaseConfig(30*time.Second, 10*time.Second, 5*time.Second)
	if err != nil {
		log.Fatal(err)
	}

	records := []coordination.StateRecord{
		registration(role, "node-1", 0, 0),
		registration(role, "node-2", 1, 0),
		registration(role, "node-3", 2, 0),
		lease(role, "node-1", 3, 0, 30000),
	}
	state, err := coordination.BuildRoleState(role, records)
	if err != nil {
		log.Fatal(err)
	}

	for _, name := range []string{"node-1", "node-2", "node-3"} {
		member, err := coordination.NewMemberID(name)
		if err != nil {
			log.Fatal(err)
		}
		rank, _ := state.RankOf(member)
		decision := coordination.Evaluate(state, member, 30000, config)
		fmt.Printf("%s rank %d: %s %d\n", name, rank, decision.Action, decision.WaitUntil)
	}
	// Output:
	// node-1 rank 0: challenge 0
	// node-2 rank 0: challenge 0
	// node-3 rank 1: wait 35000
}

// registration builds the log record of one registration.
func registration(role coordination.Role, name string, offset, registeredAt int64) coordination.StateRecord {
	member, err := coordination.NewMemberID(name)
	if err != nil {
		log.Fatal(err)
	}
	return coordination.StateRecord{
		Offset: offset,
		Key:    coordination.EncodeKey(coordination.RegistrationKey(role, member)),
		Value: coordination.EncodeRegistration(coordination.Registration{
			Member:       member,
			RegisteredAt: registeredAt,
		}),
	}
}

// lease builds the log record of one lease.
func lease(role coordination.Role, name string, offset, grantedAt, deadline int64) coordination.StateRecord {
	member, err := coordination.NewMemberID(name)
	if err != nil {
		log.Fatal(err)
	}
	token, err := coordination.NewFencingToken(11, 1)
	if err != nil {
		log.Fatal(err)
	}
	return coordination.StateRecord{
		Offset: offset,
		Key:    coordination.EncodeKey(coordination.LeaseKey(role)),
		Value: coordination.EncodeLease(coordination.Lease{
			Member:    member,
			Token:     token,
			GrantedAt: grantedAt,
			Deadline:  deadline,
		}),
	}
}
