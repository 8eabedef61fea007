package coordination_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/krabka-io/krabka-streams-go/coordination"
	"github.com/krabka-io/krabka-streams-go/internal/kafkatest"
)

// TestKafkaLeadershipACL runs AcquireLeadership and DescribeLeadership on
// the real broker's SASL_PLAINTEXT listener (SCRAM-SHA-256, StandardAuthorizer),
// as principals that hold some ACLs and lack others. The test grants the
// ACLs itself, over the PLAINTEXT listener, whose principal User:ANONYMOUS is
// a super user, and deletes them when it ends.
//
//   - alice holds everything a member needs except WRITE on the
//     transactional id of the role: READ, WRITE and DESCRIBE on the state
//     topic and the command topic, DESCRIBE on the transactional id, and
//     IDEMPOTENT_WRITE on the cluster. She registers and reads, and her mint
//     is refused: AcquireLeadership must return at once an error that wraps
//     ErrNotAuthorized and names the missing ACL, and not wait until its
//     context ends.
//   - bob holds only DESCRIBE on the transactional id, and DescribeLeadership
//     of the role, which a member on the super-user listener holds, works for
//     him; for a role without his ACL it does not.
//
// kfake implements ACLs, but not the broker's exact checks per request, so
// the test runs on Kafka only (kafka_transport_test.go covers a principal
// without any ACL on both).
func TestKafkaLeadershipACL(t *testing.T) {
	c := kafkatest.Kafka(t)
	saslBrokers := kafkatest.SASLBrokers(t)
	e := klNewEnv(t, c, klConfig(t, 3*time.Second, time.Second, time.Second))
	ctx := ktContext(t)
	admin := c.Admin(t)
	commands := c.CreateTopic(t, "coord-acl-commands", 1, nil)
	role := ktRole(t, "acl")

	grants := []*kadm.ACLBuilder{
		kadm.NewACLs().Allow("User:alice").AllowHosts().Topics(e.topic, commands).
			Operations(kadm.OpRead, kadm.OpWrite, kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral),
		kadm.NewACLs().Allow("User:alice").AllowHosts().TransactionalIDs(role.String()).
			Operations(kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral),
		kadm.NewACLs().Allow("User:alice").AllowHosts().Clusters().
			Operations(kadm.OpIdempotentWrite).ResourcePatternType(kadm.ACLPatternLiteral),
		kadm.NewACLs().Allow("User:bob").AllowHosts().TransactionalIDs(role.String()).
			Operations(kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral),
	}
	created := klGrant(t, admin, grants...)
	t.Logf("created %d ACLs for alice and bob", created)

	alice, bob := klSASLTransport(t, e, saslBrokers, "alice", "alice-secret"), klSASLTransport(t, e, saslBrokers, "bob", "bob-secret")

	// The authorizer takes the new ACLs up from the metadata log a moment
	// after CreateAcls returns: wait until alice may read the state
	// partition and describe the role, so that what fails below fails for
	// the one ACL she lacks.
	tp := ktPartition(t, role, e.options)
	klEventually(t, 30*time.Second, "alice's ACLs are in force", func() (bool, string) {
		attempt, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if _, err := alice.ReadPartition(attempt, tp); err != nil {
			return false, err.Error()
		}
		if _, _, err := alice.DescribeEpoch(attempt, role); err != nil {
			return false, err.Error()
		}
		return true, ""
	})

	// alice cannot take the role, and learns it at once.
	acquire, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	start := time.Now()
	leadership, err := coordination.AcquireLeadership(acquire, alice, role, fxMember(t, "alice-1"), e.options...)
	elapsed := time.Since(start)
	t.Logf("alice's AcquireLeadership returned after %v: %v", elapsed, err)
	switch {
	case leadership != nil:
		_ = leadership.Resign(ctx)
		t.Fatalf("alice took role %s without WRITE on its transactional id", role)
	case acquire.Err() != nil:
		t.Fatalf("alice's AcquireLeadership waited until its context ended: %v", err)
	case !errors.Is(err, coordination.ErrNotAuthorized) || errors.Is(err, coordination.ErrFenced):
		t.Fatalf("alice's AcquireLeadership = %v; want an error that wraps ErrNotAuthorized and not ErrFenced", err)
	case !strings.Contains(err.Error(), "TRANSACTIONAL_ID_AUTHORIZATION_FAILED") || !strings.Contains(err.Error(), "WRITE") || !strings.Contains(err.Error(), "TransactionalId"):
		t.Fatalf("alice's AcquireLeadership = %v; want a message that names the missing ACL, WRITE on the TransactionalId", err)
	case elapsed > 10*time.Second:
		t.Fatalf("alice's AcquireLeadership took %v to give up on a missing ACL", elapsed)
	}
	// She registered, and left the roster when she gave up.
	e.waitRoster(t, role, "")
	if status := e.describe(t, role); status.Held {
		t.Fatalf("DescribeLeadership after alice's refused mint = %v; want a role that nobody took", status)
	}

	// A member on the super-user listener takes the role, and bob, with
	// DESCRIBE on its transactional id only, sees its token.
	holder := e.campaign(t, e.member(t, "node-1"), role, "node-1").await(t, 30*time.Second)
	klEventually(t, 30*time.Second, "bob's DescribeLeadership names node-1's token", func() (bool, string) {
		status, err := coordination.DescribeLeadership(ctx, bob, role)
		if err != nil {
			return false, err.Error()
		}
		return status.Authoritative(holder.Token()), status.String()
	})
	t.Logf("bob, with DESCRIBE on the transactional id only, sees role %s held under %s", role, holder.Token())

	// The ACL is what lets him: another role is closed to him.
	other := ktRole(t, "acl-other")
	if _, err := coordination.DescribeLeadership(ctx, bob, other); !errors.Is(err, coordination.ErrNotAuthorized) {
		t.Fatalf("bob's DescribeLeadership of %s, without an ACL = %v; want an error that wraps ErrNotAuthorized", other, err)
	}
}

// klGrant creates the ACLs of grants and deletes them when the test ends.
// It returns how many ACLs it created.
func klGrant(t *testing.T, admin *kadm.Client, grants ...*kadm.ACLBuilder) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	created := 0
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		deleted := 0
		for _, grant := range grants {
			results, err := admin.DeleteACLs(ctx, grant)
			for _, r := range results {
				err = errors.Join(err, r.Err)
				deleted += len(r.Deleted)
			}
			if err != nil {
				t.Errorf("delete the ACLs of the test: %v", err)
			}
		}
		if deleted > created {
			t.Errorf("deleted %d ACLs at the end of the test; want at most the %d it created", deleted, created)
		}
	})
	for _, grant := range grants {
		results, err := admin.CreateACLs(ctx, grant)
		for _, r := range results {
			if err = errors.Join(err, r.Err); r.Err == nil {
				created++
			}
		}
		if err != nil {
			t.Fatalf("create ACLs: %v", err)
		}
	}
	return created
}

// klSASLTransport opens a KafkaTransport on the SASL listener as user,
// closed when the test ends.
func klSASLTransport(t *testing.T, e *klEnv, brokers []string, user, password string) *coordination.KafkaTransport {
	t.Helper()
	options := []kgo.Opt{kgo.SASL(scram.Auth{User: user, Pass: password}.AsSha256Mechanism())}
	transport, err := coordination.NewKafkaTransportWithOptions(e.lease, options, brokers...)
	if err != nil {
		t.Fatalf("NewKafkaTransportWithOptions(%s): %v", user, err)
	}
	t.Cleanup(transport.Close)
	return transport
}

// TestKafkaLeadershipACLWrites (issue 9, item 7) runs a leadership of alice
// on the SASL listener, with every ACL of a member, and checks the two
// refusals that a holder meets on an ACL cluster:
//
//   - a guarded record for a topic that alice may not write
//     (TOPIC_AUTHORIZATION_FAILED) fails that write with an error that wraps
//     ErrNotAuthorized and names the topic, and leaves the leadership alone:
//     the next write and the renewal go on;
//   - once an operator revokes WRITE on the role's transactional id, the
//     next renewal is refused (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), and
//     the leadership ends with an error that wraps ErrNotAuthorized, not
//     only ErrProducerLost: no retry helps until the ACL is back.
func TestKafkaLeadershipACLWrites(t *testing.T) {
	c := kafkatest.Kafka(t)
	saslBrokers := kafkatest.SASLBrokers(t)
	e := klNewEnv(t, c, klConfig(t, 6*time.Second, 2*time.Second, time.Second))
	ctx := ktContext(t)
	admin := c.Admin(t)
	commands := c.CreateTopic(t, "coord-aclw-commands", 1, nil)
	forbidden := c.CreateTopic(t, "coord-aclw-forbidden", 1, nil)
	role := ktRole(t, "aclw")

	transactionalWrite := kadm.NewACLs().Allow("User:alice").AllowHosts().TransactionalIDs(role.String()).
		Operations(kadm.OpWrite).ResourcePatternType(kadm.ACLPatternLiteral)
	klGrant(t, admin,
		kadm.NewACLs().Allow("User:alice").AllowHosts().Topics(e.topic, commands).
			Operations(kadm.OpRead, kadm.OpWrite, kadm.OpDescribe, kadm.OpDescribeConfigs).ResourcePatternType(kadm.ACLPatternLiteral),
		kadm.NewACLs().Allow("User:alice").AllowHosts().TransactionalIDs(role.String()).
			Operations(kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral),
		transactionalWrite,
		kadm.NewACLs().Allow("User:alice").AllowHosts().Clusters().
			Operations(kadm.OpIdempotentWrite).ResourcePatternType(kadm.ACLPatternLiteral),
	)
	alice := klSASLTransport(t, e, saslBrokers, "alice", "alice-secret")

	var holder *coordination.Leadership
	klEventually(t, 60*time.Second, "alice takes the role once her ACLs are in force", func() (bool, string) {
		acquire, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		leadership, err := coordination.AcquireLeadership(acquire, alice, role, fxMember(t, "alice-1"), e.options...)
		if err != nil {
			return false, err.Error()
		}
		holder = leadership
		return true, ""
	})
	t.Cleanup(func() { _ = holder.Resign(context.Background()) })

	err := holder.Write(ctx, coordination.GuardedRecord{Topic: forbidden, Value: []byte("refused")})
	t.Logf("alice's write to %s, which she may not write: %v", forbidden, err)
	switch {
	case err == nil:
		t.Fatalf("alice wrote to %s without WRITE on it", forbidden)
	case errors.Is(err, coordination.ErrFenced) || errors.Is(err, coordination.ErrProducerLost):
		t.Fatalf("a refused topic ended the leadership: %v", err)
	case !errors.Is(err, coordination.ErrNotAuthorized):
		t.Fatalf("alice's write to %s = %v; want an error that wraps ErrNotAuthorized", forbidden, err)
	case !strings.Contains(err.Error(), "TOPIC_AUTHORIZATION_FAILED") || !strings.Contains(err.Error(), "WRITE on Topic:"+forbidden):
		t.Fatalf("alice's write to %s = %v; want the broker's TOPIC_AUTHORIZATION_FAILED and the missing ACL named", forbidden, err)
	}
	klAlive(t, "alice-1", holder)
	if err := holder.Write(ctx, coordination.GuardedRecord{Topic: commands, Value: []byte("allowed")}); err != nil {
		t.Fatalf("alice's write to %s after the refused one: %v", commands, err)
	}
	if err := holder.Renew(ctx); err != nil {
		t.Fatalf("alice's renewal after the refused write: %v", err)
	}
	klAlive(t, "alice-1", holder)

	// An operator revokes WRITE on the transactional id.
	results, err := admin.DeleteACLs(ctx, transactionalWrite)
	for _, r := range results {
		err = errors.Join(err, r.Err)
	}
	if err != nil {
		t.Fatalf("revoke alice's WRITE on the transactional id: %v", err)
	}
	klEventually(t, 30*time.Second, "a renewal after the revocation is refused", func() (bool, string) {
		if err := holder.Renew(ctx); err != nil {
			return true, ""
		}
		return false, "the renewal succeeded"
	})
	select {
	case <-holder.Done():
	case <-time.After(10 * time.Second):
		t.Fatalf("the leadership holds after a refused renewal")
	}
	t.Logf("alice's leadership after the revocation: %v", holder.Err())
	if err := holder.Err(); !errors.Is(err, coordination.ErrNotAuthorized) || errors.Is(err, coordination.ErrFenced) {
		t.Fatalf("alice's leadership ended with %v; want an error that wraps ErrNotAuthorized and not ErrFenced", err)
	}
}
