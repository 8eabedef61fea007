package coordination_test

import (
	"context"
	"fmt"
	"log"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// A third party checks the authority of a writer with one request. It reads
// no topic, it joins no group, and it takes no epoch.
func ExampleDescribeLeadership() {
	role, err := coordination.NewRole("controller")
	if err != nil {
		log.Fatal(err)
	}
	token, err := coordination.NewFencingToken(4242, 7)
	if err != nil {
		log.Fatal(err)
	}

	status, err := coordination.DescribeLeadership(context.Background(),
		stubCoordinator{token: token}, role)
	if err != nil {
		log.Fatal(err)
	}

	stale, err := coordination.NewFencingToken(4242, 6)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(status)
	fmt.Printf("the holder writes: %t\n", status.Authoritative(token))
	fmt.Printf("a deposed member writes: %t\n", status.Authoritative(stale))
	// Output:
	// role controller: epoch 4242:7
	// the holder writes: true
	// a deposed member writes: false
}

// stubCoordinator answers with one token. A real adapter calls
// DescribeTransactions.
type stubCoordinator struct {
	token coordination.FencingToken
}

func (s stubCoordinator) AcquireEpoch(context.Context, coordination.Role) (coordination.FencingToken, error) {
	return s.token, nil
}

func (s stubCoordinator) DescribeEpoch(context.Context, coordination.Role) (coordination.FencingToken, bool, error) {
	return s.token, true, nil
}
