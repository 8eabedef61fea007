package coordination

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrFenced reports that the broker refused a write, because another member
// holds the role now.
//
// This is the expected end of a leadership. A [LeaseWriter] wraps this error
// for broker error code 47 INVALID_PRODUCER_EPOCH and for broker error code
// 90 PRODUCER_FENCED. [KafkaTransport] also wraps it for 49
// INVALID_PRODUCER_ID_MAPPING, the refusal of a producer id or epoch that
// moved at the coordinator. [AcquireLeadership] and [Leadership.Renew] find
// it with [errors.Is].
//
// A deposed leader learns that it lost the role from this error, and from
// nothing else. No clock takes part in the check. The epoch it held is
// superseded, so the cluster already rejects every write it makes. The
// caller stops the work of the role at once.
var ErrFenced = errors.New("fenced: another member holds the role")

// ErrNotHeld reports that a caller asked a *[Leadership] to act after the
// leadership ended.
var ErrNotHeld = errors.New("the member no longer holds the role")

// ErrNotAuthorized reports that the cluster refused a call for a missing
// permission: over Kafka, an ACL (broker codes 53
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED, 29 TOPIC_AUTHORIZATION_FAILED, 31
// CLUSTER_AUTHORIZATION_FAILED). No retry helps until an operator grants it,
// so [AcquireLeadership] returns it at once instead of waiting, and a
// leadership whose renewal gets it ends with an error that wraps it.
var ErrNotAuthorized = errors.New("not authorized")

// ErrProducerLost reports that the producer that carries the epoch of a
// leadership failed for a reason other than a fence, so that only a new
// epoch can write again: a refused producer state, a commit whose outcome
// the client cannot know (with [ErrOutcomeUnknown]), a transport that was
// closed. Nobody else need hold the role. The write that
// returns it says whether its records may have committed: "the outcome is
// unknown" means that they may be in the log, and a caller that dispatches
// commands reconciles by reading its command topic before it sends the
// command again.
//
// A leadership whose renewal or guarded write gets it ends, and
// [Leadership.Err] wraps it. The member competes again with
// [AcquireLeadership]; its registration still stands, so it reclaims the
// role at once when no standby took it, at the cost of one epoch.
var ErrProducerLost = errors.New("the producer of the epoch is lost")

// ErrOutcomeUnknown reports a write whose outcome the library cannot know:
// its records may be in the log, or not. A caller that dispatches commands
// reconciles by reading its command topic before it sends one again.
//
// With [ErrProducerLost] it ends the epoch and the leadership: a commit
// failed without saying how, or a request of the epoch timed out and the
// broker may still apply it to a later transaction (see the package doc,
// "Extensions and errata"). Alone, with the context's error, it reports a
// write that returned at the end of its context (plus 250 ms) with its
// transaction in flight; the producer and the leadership go on. Over
// [KafkaTransport] that transaction ends in the background within the
// transaction timeout (aborted, unless its commit was on its way), and the
// next write under the token waits for it.
var ErrOutcomeUnknown = errors.New("the outcome of the write is unknown")

// ErrMisconfigured reports a configuration that the cluster refuses, and
// that no retry repairs: a state topic that does not exist, that has
// another partition count than [WithPartitions] says, or that is not
// compacted, or a lease duration above the broker's
// transaction.max.timeout.ms. [AcquireLeadership] returns it at once, before
// it registers, instead of waiting for a role it could never hold safely.
var ErrMisconfigured = errors.New("misconfigured")

// ErrDuplicateMember reports that another live process competes for the same
// role under the same member id. Two such processes would fence each other
// in turn, and the roster would show one of them. [AcquireLeadership]
// detects it from the state topic, and returns it at once: the lease that
// names the member is renewed while the call waits, or another
// registration of the member replaces the call's own. Give every process
// its own member id.
var ErrDuplicateMember = errors.New("another live process uses this member id")

// ErrDuplicateCampaign reports a second campaign of this process for a
// role and member that it already campaigns for or holds, over the same
// transport and state topic: [AcquireLeadership], [TryAcquire] and
// [Elector.Run] return it at once, before anything is written, while an
// earlier call, its [Leadership] (until it ends) or a running Elector
// holds the (transport, topic, role, member). Two would share the
// member's registration and transactional id, and each mint would fence
// the other. The claim is per transport value: two transports of one
// cluster are not compared, and a second process is [ErrDuplicateMember]'s
// case.
var ErrDuplicateCampaign = errors.New("this process runs a campaign of this member for the role already")

// ForeignEpochError reports a role whose epoch another application mints:
// twice within ten lease durations, the coordinator held a token of the
// role under which no member of this state topic wrote a lease (the token
// that fenced this member, by the deadline of the fenced lease; with
// [WithRivalMintWatch] also a rival's mint, for a lease duration plus the
// stagger). The transactional id is the role name, one per
// cluster, so two applications with one role name on one cluster (each
// with its own state topic) fence each other's holders in turn.
// [AcquireLeadership] and [Elector.Run] return it, and it wraps
// [ErrMisconfigured]: give the roles of each application their own names.
// Find it with [errors.As].
type ForeignEpochError struct {
	Role   Role
	Topic  string         // this member's state topic
	Tokens []FencingToken // the coordinator's tokens that wrote no lease on Topic, oldest first
}

func (e *ForeignEpochError) Error() string {
	return fmt.Sprintf("coordination: role %s: %s: the transaction coordinator twice held a token of the role (%v) under which no member of state topic %s wrote a lease "+
		"while this member waited for it: another application most likely uses the role name %s (its transactional id) on this cluster with another state topic, "+
		"and the two fence each other's holders in turn; give each application's roles their own names",
		e.Role, ErrMisconfigured.Error(), e.Tokens, e.Topic, e.Role)
}

// Unwrap returns [ErrMisconfigured].
func (e *ForeignEpochError) Unwrap() error { return ErrMisconfigured }

// NameError reports a role or member name that [NewRole] or
// [NewMemberID] refuses. Find it with [errors.As]; the CLI and other
// callers compare its Fault instead of parsing the message.
type NameError struct {
	// Kind is "role" or "member id".
	Kind string
	// Name is the refused name, as the caller gave it.
	Name string
	// Fault says what is wrong, for a caller to compare: [NameEmpty],
	// [NameTooLong] or [NameNotUTF8].
	Fault NameFault
	// Reason says what is wrong in words, such as "empty" or "300 bytes,
	// the maximum is 249".
	Reason string
}

// NameFault is what is wrong with a name that [NewRole] or [NewMemberID]
// refuses: the comparable part of a [NameError].
type NameFault int

const (
	// NameEmpty is an empty name.
	NameEmpty NameFault = iota + 1
	// NameTooLong is a name longer than [MaxRoleLen] or [MaxMemberIDLen]
	// bytes.
	NameTooLong
	// NameNotUTF8 is a name that is not UTF-8 (an erratum of the
	// specification: see the package doc, "Extensions and errata").
	NameNotUTF8
)

// Error writes "coordination: invalid <kind> <name>: <reason>", with the
// name quoted as Go quotes a string; a name longer than 64 bytes is left
// out of the message.
func (e *NameError) Error() string {
	if e.Name == "" || len(e.Name) > 64 {
		return "coordination: invalid " + e.Kind + ": " + e.Reason
	}
	return fmt.Sprintf("coordination: invalid %s %q: %s", e.Kind, e.Name, e.Reason)
}

// StateTopicError reports a state topic that members cannot share safely:
// it does not exist, its partition count differs from the configured one,
// or it is not compacted. It wraps [ErrMisconfigured]. Find it with
// [errors.As]; [KafkaTransport.CheckStateTopic] returns it.
type StateTopicError struct {
	// Topic is the name of the state topic.
	Topic string
	// Missing reports a topic that does not exist.
	Missing bool
	// Partitions is the topic's partition count, and WantPartitions the
	// configured one ([WithPartitions]); they differ for a wrong count.
	Partitions, WantPartitions int
	// CleanupPolicy is the topic's cleanup.policy when it lacks compact,
	// and empty otherwise.
	CleanupPolicy string
	// Detail says what goes wrong and what to do.
	Detail string
}

// Error writes "coordination: state topic <topic>: misconfigured: <detail>".
func (e *StateTopicError) Error() string {
	return "coordination: state topic " + e.Topic + ": " + ErrMisconfigured.Error() + ": " + e.Detail
}

// Unwrap returns [ErrMisconfigured].
func (e *StateTopicError) Unwrap() error { return ErrMisconfigured }

// contextError is an error of this package that adds context to another
// one, with the "coordination: " prefix once: the message of the wrapped
// error loses its own prefix. errors.Is and errors.As see every wrapped
// error.
type contextError struct {
	msg  string
	errs []error
}

func (e *contextError) Error() string   { return e.msg }
func (e *contextError) Unwrap() []error { return e.errs }

// wrapf returns "coordination: <format>: <err>" wrapping err, and also the
// sentinels, whose messages go between the context and err's. A "coordination: "
// prefix of err's message is dropped, so that a chain of wrapped errors
// carries the prefix once.
func wrapf(err error, sentinels []error, format string, args ...any) error {
	var b strings.Builder
	b.WriteString("coordination: ")
	fmt.Fprintf(&b, format, args...)
	for _, s := range sentinels {
		b.WriteString(": ")
		b.WriteString(strings.TrimPrefix(s.Error(), "coordination: "))
	}
	b.WriteString(": ")
	b.WriteString(strings.TrimPrefix(err.Error(), "coordination: "))
	return &contextError{msg: b.String(), errs: append(slices.Clone(sentinels), err)}
}
