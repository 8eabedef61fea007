package chaos

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
)

// Command is one command that a leader appends to the command topic under
// the epoch of its role. The record value is the JSON encoding of a Command,
// and the record key is the role name.
type Command struct {
	// Role is the role whose leader wrote the command.
	Role string `json:"role"`

	// Member is the member id of the writer.
	Member string `json:"member"`

	// Incarnation counts the processes of one member id: the orchestrator
	// starts a member at incarnation 1 and adds one at every restart.
	Incarnation int `json:"inc"`

	// Seq numbers the commands of one incarnation, from 1, across all its
	// roles. Member, Incarnation and Seq together name one command.
	Seq int64 `json:"seq"`

	// Token is the fencing token of the leadership, in the
	// producer_id:producer_epoch form of [coordination.FencingToken.String].
	Token string `json:"token"`

	// WallMillis is the host time at which the writer built the command, in
	// milliseconds since the Unix epoch. It is the real host clock, never the
	// skewed clock of the member.
	WallMillis int64 `json:"wall"`

	// ClockMillis is the time that the skewed clock of the member read at the
	// same instant.
	ClockMillis int64 `json:"clock"`

	// Part and Parts place the record in its command: one Write carries
	// Parts records (part 0 to Parts-1), spread over the partitions of
	// its role, in one transaction. Parts 0 is a command of one record
	// (the runs before multi-record writes).
	Part  int `json:"part,omitempty"`
	Parts int `json:"parts,omitempty"`
}

// ID names the command across the run.
func (c Command) ID() CommandID {
	return CommandID{Member: c.Member, Incarnation: c.Incarnation, Seq: c.Seq}
}

// PartCount returns the number of records of the command: Parts, or 1 for
// a command of one record.
func (c Command) PartCount() int { return max(c.Parts, 1) }

// CommandPartitions returns the partitions of the command topic that the
// leader of the role of index role (of roles roles) writes to: role,
// role+roles, ..., one per unit of spread (0 or 1: role alone). The topic
// has roles × max(spread, 1) partitions. A role outside 0..roles-1, a
// spread below 0, or a topic of more partitions than Kafka's int32
// partition field holds is an error that names the values.
func CommandPartitions(role, roles, spread int) ([]int32, error) {
	if roles < 1 || role < 0 || role >= roles || spread < 0 || max(spread, 1) > math.MaxInt32/roles {
		return nil, fmt.Errorf("chaos: the command partitions of role %d of %d roles with spread %d: want a role from 0 to roles-1, "+
			"a spread of 0 or more, and at most %d partitions (roles × max(spread, 1), Kafka's int32 partition)", role, roles, spread, math.MaxInt32)
	}
	out := make([]int32, max(spread, 1))
	for i := range out {
		out[i] = int32(role + i*roles) //nolint:gosec // below roles × max(spread, 1), which the check above bounds to MaxInt32
	}
	return out, nil
}

// CommandID names one command of a run.
type CommandID struct {
	Member      string
	Incarnation int
	Seq         int64
}

// String writes member/incarnation/seq.
func (id CommandID) String() string {
	return fmt.Sprintf("%s/%d/%d", id.Member, id.Incarnation, id.Seq)
}

// Ack is one line of the ack log of a member: a command whose guarded write
// returned nil, which means the transaction that holds it committed.
type Ack struct {
	Command

	// AckMillis is the host time at which the write returned.
	AckMillis int64 `json:"ack"`
}

// Event kinds of a member's event log.
const (
	// EventStart marks the start of an incarnation.
	EventStart = "start"

	// EventAcquired marks a won leadership. Token names it.
	EventAcquired = "acquired"

	// EventFenced marks a guarded write that the broker refused with
	// [coordination.ErrFenced]. Seq names the refused command, which must
	// never become visible.
	EventFenced = "fenced"

	// EventEnded marks the end of a leadership for another reason than a
	// refused command write: a renewal was fenced or lost its producer
	// ([coordination.ErrProducerLost]), a command write lost its producer,
	// or the member resigned.
	EventEnded = "ended"

	// EventWriteError marks a guarded write whose error says that its
	// outcome is unknown (see outcomeUnknown): the command may or may not
	// be visible, but never in part and never twice.
	EventWriteError = "write-error"

	// EventWriteFailed marks a guarded write whose error says that nothing
	// committed: an error that wraps none of ErrFenced, ErrNotHeld and an
	// unknown outcome (the contract of [coordination.ExtendedTransport.WriteGuarded]). No
	// record of the command may ever become visible; one that does is a
	// false report ([ViolationFalseReport]).
	EventWriteFailed = "write-failed"

	// EventAcquireError marks a failed call of AcquireLeadership.
	EventAcquireError = "acquire-error"

	// EventExit marks the orderly end of an incarnation.
	EventExit = "exit"
)

// Event is one line of the event log of a member. The member also prints it
// on its standard output, where the orchestrator follows the leaders.
type Event struct {
	// WallMillis is the host time of the event.
	WallMillis int64 `json:"wall"`

	// Kind is one of the Event* constants.
	Kind string `json:"ev"`

	// Member and Incarnation name the process.
	Member      string `json:"member"`
	Incarnation int    `json:"inc"`

	// Role, Token and Seq describe the event where they apply.
	Role  string `json:"role,omitempty"`
	Token string `json:"token,omitempty"`
	Seq   int64  `json:"seq,omitempty"`

	// Error is the text of the error of the event, if any.
	Error string `json:"err,omitempty"`
}

// Kinds of [Call].
const (
	CallAcquire  = "acquire"  // coordination.AcquireLeadership
	CallWrite    = "write"    // Leadership.Write
	CallResign   = "resign"   // Leadership.Resign
	CallTransfer = "transfer" // Leadership.TransferTo, at a stop with a successor (rolling.go)
	CallClose    = "close"    // KafkaTransport.Close, which takes no context
)

// Call is one line of the call log of a member: one exported call of
// package coordination, its context budget and how long it took, so that
// the checker can tell a call that outlived its context.
type Call struct {
	// WallMillis is the host time at which the call began.
	WallMillis int64 `json:"wall"`

	// Member and Incarnation name the process, and Role the role.
	Member      string `json:"member"`
	Incarnation int    `json:"inc"`
	Role        string `json:"role,omitempty"`

	// Call is one of the Call* constants.
	Call string `json:"call"`

	// BudgetMillis is the time from the start of the call to the deadline
	// of its context, 0 for a context without a deadline.
	BudgetMillis int64 `json:"budget,omitempty"`

	// TookMillis is how long the call took.
	TookMillis int64 `json:"took"`

	// OverMillis is how long after the end of its context (its deadline, or
	// its cancellation) the call returned, or -1 when the context was still
	// live when the call returned.
	OverMillis int64 `json:"over"`

	// Error is the text of the call's error, if any.
	Error string `json:"err,omitempty"`
}

// Fault kinds, as the --faults flag names them.
const (
	FaultPause         = "pause"
	FaultKill          = "kill"
	FaultCut           = "cut"
	FaultSkew          = "skew"
	FaultBrokerRestart = "broker-restart"

	// The faults of a node of a multi-broker cluster, which the cluster
	// command carries out (see [ClusterControl]).

	// FaultCoordinatorKill kills (SIGKILL) the node that is the transaction
	// coordinator of a role, restarts it after the hold, and waits until
	// every replica of the run's partitions and of __transaction_state is
	// back in sync.
	FaultCoordinatorKill = "coordinator-kill"

	// FaultStateLeaderKill does the same to the leader of the partition of
	// the state topic that holds the roles.
	FaultStateLeaderKill = "state-leader-kill"

	// FaultControllerStop stops (SIGSTOP) the active KRaft controller for
	// the hold, then continues it (SIGCONT). The nodes are combined
	// broker+controller nodes, so its broker stops too.
	FaultControllerStop = "controller-stop"

	// FaultRollingRestart restarts every node in turn, gracefully (SIGTERM,
	// a controlled shutdown), and waits for the replicas to be back in sync
	// before the next node.
	FaultRollingRestart = "rolling-restart"

	// FaultBrokerCut cuts every member off one node, the transaction
	// coordinator of a role, for the hold (its proxy of that node stalls,
	// as a silent network does), and heals the cut. The harness cannot cut
	// the nodes off each other (they talk on loopback without a proxy), so
	// Kafka itself sees no fault: the node keeps its partitions and its
	// coordinators, and the members must wait for the heal for what only
	// that node serves.
	FaultBrokerCut = "broker-cut"

	// FaultRequest faults one Kafka request of one member, of an API key
	// drawn from the run's --request-keys, in one of the [RequestModes]: a
	// delay, a lost answer, a hold until the client resent it, or a
	// duplicate. The member's Kafka-aware proxy carries it out
	// ([RequestFaulter], [Arm]); the fault records the request it took
	// ([Fault].Hit), or none if no request of the key came within the
	// hold.
	FaultRequest = "request"
)

// AllFaults lists every fault kind, in the order of the summary table.
var AllFaults = []string{FaultPause, FaultKill, FaultCut, FaultSkew, FaultBrokerRestart,
	FaultCoordinatorKill, FaultStateLeaderKill, FaultControllerStop, FaultRollingRestart, FaultBrokerCut, FaultRequest}

// MemberFaults lists the faults of a member process, and ClusterFaults the
// faults of a node of a multi-broker cluster.
var (
	MemberFaults  = []string{FaultPause, FaultKill, FaultCut, FaultSkew}
	ClusterFaults = []string{FaultCoordinatorKill, FaultStateLeaderKill, FaultControllerStop, FaultRollingRestart, FaultBrokerCut}
)

// IsBrokerFault reports whether the kind is a fault of the brokers rather
// than of a member: the restart of the single broker or a cluster fault.
func IsBrokerFault(kind string) bool {
	return kind == FaultBrokerRestart || slices.Contains(ClusterFaults, kind)
}

// Fault is one line of the nemesis log: one fault, written when the nemesis
// healed it (or at the end of the run for a fault it never healed).
type Fault struct {
	// Index is the position of the fault in the plan.
	Index int `json:"i"`

	// Kind is one of the Fault* constants.
	Kind string `json:"kind"`

	// Target is the member id of the target, empty for a broker restart.
	Target string `json:"target,omitempty"`

	// Rule says how the nemesis chose the target, for example "leader of
	// controller" or "member 3".
	Rule string `json:"rule,omitempty"`

	// StartMillis is the host time at which the fault began: the signal, the
	// cut, the new clock offset, or the start of the restart command.
	StartMillis int64 `json:"start"`

	// EndMillis is the host time at which the nemesis healed the fault: the
	// SIGCONT, the restart of the member, the heal of the proxy, the reset of
	// the offset, or the return of the restart command.
	EndMillis int64 `json:"end"`

	// Node is the node id of the broker that a cluster fault hit (the first
	// node of a rolling restart), and Nodes every node it hit in order.
	Node  int32   `json:"node,omitempty"`
	Nodes []int32 `json:"nodes,omitempty"`

	// HealMillis is the host time at which the nemesis started the node of
	// a cluster fault again, or continued it (for a rolling restart, when
	// it started the last node again). For a cluster fault, EndMillis is
	// the later instant at which the cluster had recovered: every node up
	// and every replica of the run's partitions in sync.
	HealMillis int64 `json:"heal,omitempty"`

	// Mode is "drop" or "stall" for a cut.
	Mode string `json:"mode,omitempty"`

	// SkewMillis is the clock offset of a skew.
	SkewMillis int64 `json:"skew,omitempty"`

	// Request is the mode of a request fault, Keys the API keys it was
	// armed for, and Hit the request it took (nil: none came).
	Request RequestMode `json:"request,omitempty"`
	Keys    []int16     `json:"keys,omitempty"`
	Hit     *RequestHit `json:"hit,omitempty"`
	// Code is the error code of an error-code request fault.
	Code int16 `json:"code,omitempty"`

	// LeaderOf lists the roles that the orchestrator saw the target lead when
	// the fault began.
	LeaderOf []string `json:"leader_of,omitempty"`

	// Error is the text of an error of the nemesis action, if any.
	Error string `json:"err,omitempty"`
}

// Duration returns the extent of the fault.
func (f Fault) Duration() time.Duration {
	return time.Duration(f.EndMillis-f.StartMillis) * time.Millisecond
}

// LineLog appends JSON lines to a file opened with O_APPEND. Each line goes
// out in one write(2), so a line that the process wrote survives a SIGKILL
// of the process, and two processes that share the file never interleave
// within a line. It is safe for concurrent use.
type LineLog struct {
	mu   sync.Mutex
	file *os.File
	tee  io.Writer
}

// OpenLineLog opens, or creates, the file for appending. A non-nil tee
// receives a copy of every line.
func OpenLineLog(path string, tee io.Writer) (*LineLog, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	file, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &LineLog{file: file, tee: tee}, nil
}

// Append writes v as one JSON line.
func (l *LineLog) Append(v any) error {
	line, err := json.Marshal(v)
	if err != nil {
		return err
	}
	line = append(line, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.file.Write(line); err != nil {
		return err
	}
	if l.tee != nil {
		_, _ = l.tee.Write(line)
	}
	return nil
}

// Close closes the file.
func (l *LineLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.file.Close()
}

// ReadLines decodes every JSON line of the file into a T. A missing file
// reads as empty. A torn last line, which a SIGKILL cannot produce but a
// full disk can, is reported as an error with its line number.
func ReadLines[T any](path string) ([]T, error) {
	file, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer file.Close()
	var out []T
	scanner := bufio.NewScanner(file)
	scanner.Buffer(make([]byte, 64*1024), 16*1024*1024)
	line := 0
	for scanner.Scan() {
		line++
		if len(scanner.Bytes()) == 0 {
			continue
		}
		var v T
		if err := json.Unmarshal(scanner.Bytes(), &v); err != nil {
			return out, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		out = append(out, v)
	}
	return out, scanner.Err()
}
