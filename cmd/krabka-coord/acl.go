package main

// An ACL refusal names the one ACL that the step which failed needs, and
// the kafka-acls.sh line that grants it, so that an operator who grants
// what an error says does not meet the next missing ACL one error at a
// time without knowing how many follow: the README lists the whole set of
// each command (member, observer, operator), and each step checks the ACLs
// in the order in which the command needs them.
//
// Kafka implies DESCRIBE from READ, WRITE, DELETE and ALTER, and
// DESCRIBE_CONFIGS from ALTER_CONFIGS, so a step that needs DESCRIBE names
// the stronger operation when the command needs it anyway (a member needs
// WRITE on its role's transactional id, which covers the DESCRIBE of
// DescribeTransactions).

import (
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// Kafka ACL operations, spelled as kafka-acls.sh takes them.
const (
	opRead            = "Read"
	opWrite           = "Write"
	opDescribe        = "Describe"
	opDescribeConfigs = "DescribeConfigs"
	opCreate          = "Create"
)

// Kafka ACL resource types.
const (
	resTopic           = "Topic"
	resTransactionalID = "TransactionalId"
	resCluster         = "Cluster"
)

// aclNeed is one ACL that a step of a command needs: an operation on a
// resource.
type aclNeed struct {
	operation    string
	resourceType string
	resource     string // "" for the cluster
}

// topicACL is an operation on the state topic (or another topic).
func topicACL(operation, topic string) aclNeed {
	return aclNeed{operation: operation, resourceType: resTopic, resource: topic}
}

// roleACL is an operation on the transactional id of a role, which is the
// role's name.
func roleACL(operation string, role coordination.Role) aclNeed {
	return aclNeed{operation: operation, resourceType: resTransactionalID, resource: role.String()}
}

// String writes the ACL as Kafka's docs do: "WRITE on TransactionalId
// controller".
func (n aclNeed) String() string {
	op := strings.ToUpper(n.operation[:1]) + n.operation[1:]
	// DescribeConfigs -> DESCRIBE_CONFIGS, IdempotentWrite -> IDEMPOTENT_WRITE.
	var b strings.Builder
	for i, r := range op {
		if i > 0 && r >= 'A' && r <= 'Z' {
			b.WriteByte('_')
		}
		b.WriteRune(r)
	}
	if n.resourceType == resCluster {
		return strings.ToUpper(b.String()) + " on the Cluster"
	}
	return strings.ToUpper(b.String()) + " on " + n.resourceType + " " + showName(n.resource)
}

// grantCommand is the kafka-acls.sh line that grants the ACL to principal,
// run by an administrator against bootstrap.
func (n aclNeed) grantCommand(principal, bootstrap string) string {
	resource := "--cluster"
	switch n.resourceType {
	case resTopic:
		resource = "--topic " + shellQuote(n.resource)
	case resTransactionalID:
		resource = "--transactional-id " + shellQuote(n.resource)
	}
	return fmt.Sprintf("kafka-acls.sh --bootstrap-server %s --command-config admin.properties --add --allow-principal %s --operation %s %s",
		shellQuote(bootstrap), shellQuote(principal), n.operation, resource)
}

// shellQuote quotes a word for a POSIX shell when it needs it.
func shellQuote(word string) string {
	if word != "" && strings.IndexFunc(word, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.:,/=@+", r))
	}) < 0 {
		return word
	}
	return "'" + strings.ReplaceAll(word, "'", `'\''`) + "'"
}

// isDenied reports whether err is an ACL refusal of the cluster.
func isDenied(err error) bool {
	return errors.Is(err, coordination.ErrNotAuthorized) ||
		errors.Is(err, kerr.TopicAuthorizationFailed) ||
		errors.Is(err, kerr.TransactionalIDAuthorizationFailed) ||
		errors.Is(err, kerr.ClusterAuthorizationFailed) ||
		errors.Is(err, kerr.GroupAuthorizationFailed)
}

// principal is the Kafka principal of the connection, as the ACLs name
// it: User:<the SASL user>, or a placeholder for a TLS certificate or an
// anonymous listener, whose principal the broker derives itself.
func (g *globals) principal() string {
	if g.saslMechanism != "" && g.saslUser != "" {
		return "User:" + g.saslUser
	}
	return unknownPrincipal
}

// unknownPrincipal is the principal of a connection without SASL, which
// the broker derives itself.
const unknownPrincipal = "User:<your principal>"

// deniedError is the error of a step that the cluster refused for a
// missing ACL: exit code 4, and one line that names the step, the ACL and
// the line that grants it.
func (c *cluster) deniedError(step string, need aclNeed, err error) error {
	return clusterError("%s: the cluster refused it: %s lacks %s (%s); grant it with: %s",
		step, c.g.principal(), need, kafkaCause(err), need.grantCommand(c.g.principal(), c.brokers[0]))
}

// kafkaCause names the Kafka error code in err, or err's own text.
func kafkaCause(err error) string {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Message
	}
	return oneLine(errText(err))
}

// memberDenial picks the ACL that a refusal of a member's campaign names:
// the transactional id (WRITE covers the DESCRIBE of DescribeTransactions),
// and otherwise the topic: READ when the read was refused, WRITE when a
// registration or a lease write was. A refused producer id of the plain
// producer (CLUSTER_AUTHORIZATION_FAILED) names WRITE on the topic too:
// since Kafka 3.0 WRITE on a topic implies IDEMPOTENT_WRITE, and the
// member needs it anyway.
func memberDenial(err error, role coordination.Role, topic string, readOK bool) aclNeed {
	switch {
	case errors.Is(err, kerr.TransactionalIDAuthorizationFailed):
		return roleACL(opWrite, role)
	case !readOK:
		return topicACL(opRead, topic)
	}
	return topicACL(opWrite, topic)
}
