package coordination_test

import (
	"fmt"
	"log"
	"math"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// Both writers of a role pin the partition from the role name, so the
// records of one role keep a total order. The rule is Kafka's own key
// partitioning.
func ExampleRolePartition() {
	role, err := coordination.NewRole("controller")
	if err != nil {
		log.Fatal(err)
	}

	partition, err := coordination.RolePartition(role, 16)
	if err != nil {
		log.Fatal(err)
	}

	fmt.Printf("role %s writes to %s-%d\n", role, coordination.StateTopic, partition)
	// Output:
	// role controller writes to __coordination_state-12
}

// The producer epoch is an int16 and it wraps. Kafka answers the exhaustion
// with a fresh producer id and an epoch of zero, so a comparison of the epoch
// alone would keep a deposed leader in place.
func ExampleFencingToken_Compare() {
	exhausted, err := coordination.NewFencingToken(4, math.MaxInt16)
	if err != nil {
		log.Fatal(err)
	}
	fresh, err := coordination.NewFencingToken(5, 0)
	if err != nil {
		log.Fatal(err)
	}

	fmt.Printf("%s supersedes %s: %t\n", fresh, exhausted, fresh.Supersedes(exhausted))
	fmt.Printf("the epoch alone would say: %t\n", fresh.ProducerEpoch() > exhausted.ProducerEpoch())
	// Output:
	// 5:0 supersedes 4:32767: true
	// the epoch alone would say: false
}

// A member writes a lease record under the epoch of its role. A reader of the
// coordination topic decodes the record with the codec of this package.
func ExampleDecodeLease() {
	member, err := coordination.NewMemberID("node-1")
	if err != nil {
		log.Fatal(err)
	}
	token, err := coordination.NewFencingToken(4242, 7)
	if err != nil {
		log.Fatal(err)
	}
	written := coordination.Lease{
		Member:    member,
		Token:     token,
		GrantedAt: 1700000000000,
		Deadline:  1700000030000,
	}

	value := coordination.EncodeLease(written)
	read, err := coordination.DecodeLease(value)
	if err != nil {
		log.Fatal(err)
	}

	fmt.Printf("%d bytes\n", len(value))
	fmt.Printf("%s holds the role with token %s until %d\n", read.Member, read.Token, read.Deadline)
	// Output:
	// 36 bytes
	// node-1 holds the role with token 4242:7 until 1700000030000
}
