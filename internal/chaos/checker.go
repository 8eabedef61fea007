package chaos

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// CommandRecord is one record of a partition of the command topic, as a
// read_committed reader sees it, in offset order within its partition.
type CommandRecord struct {
	// Partition is the partition of the record (one of the role's
	// [CommandPartitions]), and Offset its offset there.
	Partition int32
	Offset    int64

	// Value is the record value, the JSON encoding of a [Command].
	Value []byte
}

// LeaseRecord is one lease record of a role in the state topic, in offset
// order. A registration record is no LeaseRecord.
type LeaseRecord struct {
	// Offset is the offset of the record in its partition.
	Offset int64

	// Tombstone reports a cleared lease; Lease is then the zero value.
	Tombstone bool

	// Lease is the decoded lease.
	Lease coordination.Lease
}

// LeaseRecords picks the lease records of one role out of the records of a
// partition of the state topic, in offset order. A record of another role
// or a registration is dropped; a record that does not decode is returned
// as an error, because the checker should not guess.
func LeaseRecords(role coordination.Role, records []coordination.StateRecord) ([]LeaseRecord, error) {
	var out []LeaseRecord
	for _, record := range records {
		key, err := coordination.DecodeKey(record.Key)
		if err != nil {
			return nil, fmt.Errorf("state record at offset %d: %w", record.Offset, err)
		}
		if key.Role != role || key.Kind != coordination.KindLease {
			continue
		}
		if coordination.IsTombstone(record.Value) {
			out = append(out, LeaseRecord{Offset: record.Offset, Tombstone: true})
			continue
		}
		lease, err := coordination.DecodeLease(record.Value)
		if err != nil {
			return nil, fmt.Errorf("lease record at offset %d: %w", record.Offset, err)
		}
		out = append(out, LeaseRecord{Offset: record.Offset, Lease: lease})
	}
	slices.SortStableFunc(out, func(a, b LeaseRecord) int { return cmp.Compare(a.Offset, b.Offset) })
	return out, nil
}

// CheckConfig holds the timings that bound a failover.
type CheckConfig struct {
	// Members is the number of members of the run.
	Members int

	// Lease and Stagger are the lease duration and the challenge stagger of
	// the run.
	Lease, Stagger time.Duration

	// Slack is the extra time a failover may take past the lease and the
	// staggers: the poll interval, the mint, the first lease write and the
	// first command write.
	Slack time.Duration

	// EndMillis is the host time at which the run stopped its members. A
	// fault whose failover bound reaches past it is not measured.
	EndMillis int64

	// StartMillis is the host time at which the fault phase began; a
	// leadership change before it is not counted against a fault.
	StartMillis int64

	// CopyLife is how long after its attempt ended a copy of an
	// InitProducerId may still land, as the library waits it out (the read
	// timeout plus the transaction timeout): a rival whose copy fenced a
	// holder acquires within it. 0 takes the lease plus 10 s.
	CopyLife time.Duration

	// LinearizabilityTimeout bounds the search of the linearizability
	// check; 0 takes two minutes.
	LinearizabilityTimeout time.Duration
}

// FailoverBound returns lease + stagger × (members-1) + slack: the longest a
// failover may take after a fault of the leader, when no clock is skewed.
func (c CheckConfig) FailoverBound() time.Duration {
	return c.Lease + time.Duration(max(c.Members-1, 0))*c.Stagger + c.Slack
}

// CheckInput is everything the checker reads.
type CheckInput struct {
	// Roles lists the roles of the run.
	Roles []string

	// Commands holds the records of the command partition of each role,
	// read read_committed from the start, in offset order.
	Commands map[string][]CommandRecord

	// Leases holds the lease records of each role in the state topic.
	Leases map[string][]LeaseRecord

	// Acks holds the ack logs of every member.
	Acks []Ack

	// Events holds the event logs of every member.
	Events []Event

	// Faults holds the nemesis log.
	Faults []Fault

	// Calls holds the call logs of every member.
	Calls []Call

	// KafkaEvents holds what the nodes' logs tell of the faults: the
	// fences of brokers and the changes of the active controller.
	KafkaEvents []KafkaEvent

	// Mints holds the mint log: every answer to an InitProducerId that
	// passed a member's proxy, with its pair ([Mint]).
	Mints []Mint

	// History holds the history logs of every member, which the
	// linearizability check reads ([CheckLinearizable]).
	History []HistoryEntry

	// Config holds the timings of the run.
	Config CheckConfig
}

// Violation kinds.
const (
	// ViolationInterleave: a command of an older term appears after a
	// command of a newer term.
	ViolationInterleave = "interleave"

	// ViolationSharedToken: two writers appear under one token.
	ViolationSharedToken = "shared-token"

	// ViolationDuplicate: one command appears more than once.
	ViolationDuplicate = "duplicate"

	// ViolationReorder: the commands of one writer appear out of their
	// sequence order.
	ViolationReorder = "reorder"

	// ViolationAckMismatch: an acknowledged command appears with another
	// role or token than its writer acknowledged.
	ViolationAckMismatch = "ack-mismatch"

	// ViolationRefusedVisible: a command whose write the broker refused with
	// ErrFenced appears.
	ViolationRefusedVisible = "refused-visible"

	// ViolationLeaseRegress: a lease record of an older token appears after
	// a lease record of a newer token.
	ViolationLeaseRegress = "lease-regress"

	// ViolationTermWithoutLease: a command carries a token under which its
	// writer never wrote a lease.
	ViolationTermWithoutLease = "term-without-lease"

	// ViolationTorn: a command (one Write of several records) is visible
	// in part: the transaction that held it was torn.
	ViolationTorn = "torn"

	// ViolationFalseReport: a command whose Write returned an error that
	// says nothing committed (an event [EventWriteFailed]) is visible: the
	// library reported as known an outcome it could not know.
	ViolationFalseReport = "false-report"

	// ViolationMalformed: a command record does not decode.
	ViolationMalformed = "malformed"
)

// Violation is one breach of a safety property.
type Violation struct {
	Kind   string `json:"kind"`
	Role   string `json:"role,omitempty"`
	Offset int64  `json:"offset"`
	Detail string `json:"detail"`
}

// Failover is the measure of one fault of a leader of one role.
type Failover struct {
	// Fault is the index of the fault in the plan, Kind and Target repeat it.
	Fault  int    `json:"fault"`
	Kind   string `json:"kind"`
	Target string `json:"target"`
	Role   string `json:"role"`

	// StartMillis is the host time of the fault.
	StartMillis int64 `json:"start"`

	// Outcome is "measured", "retained" (the target wrote again under its
	// term after the fault began, so no failover was due), "unresolved" (no
	// new term before the end of the run), or "excluded" (a broker restart
	// overlapped the window, see Reason).
	Outcome string `json:"outcome"`

	// Millis is the time from the fault to the first command of the next
	// term, for the measured and excluded outcomes.
	Millis int64 `json:"ms,omitempty"`

	// BoundMillis is the bound of this failover: [CheckConfig.FailoverBound]
	// plus twice the largest clock skew in force around the fault.
	BoundMillis int64 `json:"bound_ms"`

	// Reason explains an exclusion.
	Reason string `json:"reason,omitempty"`
}

// Failover outcomes.
const (
	OutcomeMeasured   = "measured"
	OutcomeRetained   = "retained"
	OutcomeUnresolved = "unresolved"
	OutcomeExcluded   = "excluded"
)

// RoleReport holds the figures of one role.
type RoleReport struct {
	// Role names the role.
	Role string `json:"role"`

	// Commands counts its command records, Terms the terms among them, and
	// LeaseTerms the distinct tokens of its lease records.
	Commands   int `json:"commands"`
	Terms      int `json:"terms"`
	LeaseTerms int `json:"lease_terms"`
}

// FailoverStats summarises the failovers of a run.
type FailoverStats struct {
	// Measured, Retained, Unresolved and Excluded count the failovers by
	// outcome, and OverBound the measured ones over their bound.
	Measured   int `json:"measured"`
	Retained   int `json:"retained"`
	Unresolved int `json:"unresolved"`
	Excluded   int `json:"excluded"`
	OverBound  int `json:"over_bound"`

	// P50Millis, P99Millis and MaxMillis are nearest-rank percentiles of
	// the measured failovers.
	P50Millis int64 `json:"p50_ms"`
	P99Millis int64 `json:"p99_ms"`
	MaxMillis int64 `json:"max_ms"`

	// BoundMillis is [CheckConfig.FailoverBound], before the skew.
	BoundMillis int64 `json:"bound_ms"`
}

// Report is the verdict of the checker.
type Report struct {
	// Roles holds the figures of each role.
	Roles []RoleReport `json:"roles"`

	// FaultsByKind counts the faults of the nemesis log.
	FaultsByKind map[string]int `json:"faults"`

	// RequestFaults counts the request faults by API key.
	RequestFaults []RequestFaultStats `json:"request_faults,omitempty"`

	// LeadershipChanges counts, over all roles, the changes of term along
	// the command stream.
	LeadershipChanges int `json:"leadership_changes"`

	// LeaseTerms counts, over all roles, the distinct tokens of the lease
	// records, including terms that wrote no command.
	LeaseTerms int `json:"lease_terms"`

	// Commands counts the command records.
	Commands int `json:"commands"`

	// Acknowledged counts the acknowledged commands.
	Acknowledged int `json:"acknowledged"`

	// Refused counts the command writes that the broker refused with
	// ErrFenced.
	Refused int `json:"refused_fenced"`

	// SelfFenced counts the refusals with ErrFenced that the member brought
	// on itself or that nothing explains: FenceCauses.OwnLateCopy +
	// FenceCauses.Unexplained. It is safe, and costs a failover.
	SelfFenced int `json:"self_fenced"`

	// FenceCauses counts the refusals with ErrFenced by cause, and Fences
	// gives the cause of each (see [FenceAttribution]).
	FenceCauses FenceCauses        `json:"fence_causes"`
	Fences      []FenceAttribution `json:"fences,omitempty"`

	// Unknown counts the command writes that failed for another reason, and
	// UnknownPresent those of them that are present.
	Unknown        int `json:"unknown_outcome"`
	UnknownPresent int `json:"unknown_present"`

	// NotCommitted counts the command writes whose error said that nothing
	// committed; any of them present is a [ViolationFalseReport].
	NotCommitted int `json:"not_committed"`

	// Unacknowledged counts present commands that no ack and no event
	// names: a write in flight when its member was killed.
	Unacknowledged int `json:"unacknowledged_present"`

	// Violations lists every breach of safety.
	Violations []Violation `json:"violations"`

	// Lost lists the acknowledged commands that are absent.
	Lost []string `json:"lost"`

	// Failovers lists the fault-to-new-term measures.
	Failovers []Failover `json:"failovers"`

	// FailoverStats summarises Failovers.
	FailoverStats FailoverStats `json:"failover_stats"`

	// Changes lists the leadership changes of the fault phase, each with
	// the fault it is attributed to, and ChangesWithoutFault counts those
	// that no fault explains.
	Changes             []Change `json:"changes"`
	ChangesWithoutFault int      `json:"changes_without_fault"`

	// Impacts holds what each fault cost, and ByKind sums it up by kind of
	// fault, in the order of [AllFaults].
	Impacts []FaultImpact `json:"impacts"`
	ByKind  []KindImpact  `json:"by_kind"`

	// LongestGapMillis is the longest time between two acknowledged
	// commands of one role in the fault phase, and
	// LongestGapNoFaultMillis the longest of those gaps that overlap no
	// fault's window.
	LongestGapMillis        int64 `json:"longest_gap_ms"`
	LongestGapNoFaultMillis int64 `json:"longest_gap_no_fault_ms"`

	// Calls summarises the call logs by kind of call, and
	// MaxCallOverMillis is the longest time from the end of a call's
	// context to its return, over every kind.
	Calls             []CallStats `json:"calls"`
	MaxCallOverMillis int64       `json:"max_call_over_ms"`

	// EndCauses counts the leaderships that ended in the fault phase (an
	// ended or a fenced event of a member), by the cause its error names.
	EndCauses []EndCause `json:"end_causes"`

	// Linearizability is the verdict of the independent checker
	// ([CheckLinearizable]) on the same run.
	Linearizability Linearizability `json:"linearizability"`
}

// OK reports whether the run kept every safety property and lost nothing,
// by both checkers: no violation, no lost command, and a history that
// linearizes (or no history to check). A search that timed out is no
// verdict, and fails the run too.
func (r *Report) OK() bool {
	return len(r.Violations) == 0 && len(r.Lost) == 0 && r.Linearizability.OK()
}

// located is a decoded command record with its place in the log.
type located struct {
	role      string
	partition int32
	offset    int64
	cmd       Command
	token     coordination.FencingToken
}

// Check verifies the safety properties of a run and measures its failovers.
func Check(in CheckInput) *Report {
	r := &Report{FaultsByKind: make(map[string]int), Violations: []Violation{}, Lost: []string{}, Failovers: []Failover{},
		Changes: []Change{}, Impacts: []FaultImpact{}, ByKind: []KindImpact{}, Calls: []CallStats{}, EndCauses: []EndCause{}}
	for _, f := range in.Faults {
		r.FaultsByKind[f.Kind]++
	}
	r.RequestFaults = countRequestFaults(in.Faults)
	byID := make(map[CommandID][]located)
	streams := make(map[string][]located)
	for _, role := range in.Roles {
		stream := checkRole(in, role, r)
		streams[role] = stream
		for _, c := range stream {
			byID[c.cmd.ID()] = append(byID[c.cmd.ID()], c)
		}
	}
	for id, seen := range byID {
		checkParts(id, seen, r)
	}
	checkAcks(in, byID, termStarts(in, streams), r)
	measureFailovers(in, streams, r)
	measureImpact(in, streams, r)
	measureCalls(in, r)
	measureEnds(in, r)
	sortViolations(r.Violations)
	timeout := in.Config.LinearizabilityTimeout
	if timeout == 0 {
		timeout = 2 * time.Minute
	}
	r.Linearizability = CheckLinearizable(LinearizabilityInput{Roles: in.Roles, Commands: in.Commands, History: in.History, Timeout: timeout})
	return r
}

// checkParts checks the records of one command: each of its parts present
// once (a part seen twice is a duplicate), and every part present if any
// is (a transaction visible in part is torn).
func checkParts(id CommandID, seen []located, r *Report) {
	byPart := make(map[int][]located)
	for _, c := range seen {
		byPart[c.cmd.Part] = append(byPart[c.cmd.Part], c)
	}
	for part, copies := range byPart {
		if len(copies) < 2 {
			continue
		}
		where := make([]string, len(copies))
		for i, c := range copies {
			where[i] = fmt.Sprintf("%s@%d/%d", c.role, c.partition, c.offset)
		}
		slices.Sort(where)
		r.violate(ViolationDuplicate, copies[1].role, copies[1].offset, "command %s part %d appears %d times: %v", id, part, len(copies), where)
	}
	parts := seen[0].cmd.PartCount()
	if len(byPart) < parts {
		var have []int
		for part := range byPart {
			have = append(have, part)
		}
		slices.Sort(have)
		r.violate(ViolationTorn, seen[0].role, seen[0].offset, "command %s is visible in part: parts %v of %d", id, have, parts)
	}
}

// checkRole walks the command stream of one role: decoding, term order,
// writer order, and the lease behind each term.
func checkRole(in CheckInput, role string, r *Report) []located {
	records := in.Commands[role]
	stream := make([]located, 0, len(records))
	report := RoleReport{Role: role, Commands: len(records)}

	// The terms of a role are ordered by the commit order of their
	// commands in the log, never by FencingToken.Compare: producer ids are
	// not monotonic across brokers, so a legitimate successor may carry a
	// smaller pair. A term is current from its first command on; a command
	// of a term that was current before and is no more is an interleaving.
	// Each partition of the role is a log of its own, and is walked alone.
	type partitionWalk struct {
		current       coordination.FencingToken
		currentWriter string
		haveCurrent   bool
		ended         map[coordination.FencingToken]string // a term superseded in the log -> its writer
		lastSeq       map[string]located                   // member/incarnation -> last command
	}
	walks := make(map[int32]*partitionWalk)
	terms := make(map[coordination.FencingToken]bool)
	writers := make(map[string]string)         // token -> member/incarnation
	termOf := make(map[string]map[string]bool) // member -> tokens of its leases
	for _, lease := range in.Leases[role] {
		if lease.Tombstone {
			continue
		}
		member := lease.Lease.Member.String()
		if termOf[member] == nil {
			termOf[member] = make(map[string]bool)
		}
		termOf[member][lease.Lease.Token.String()] = true
	}
	for _, record := range records {
		var cmd Command
		if err := json.Unmarshal(record.Value, &cmd); err != nil {
			r.violate(ViolationMalformed, role, record.Offset, "command does not decode: %v", err)
			continue
		}
		token, err := coordination.ParseFencingToken(cmd.Token)
		if err != nil {
			r.violate(ViolationMalformed, role, record.Offset, "command %s has token %q: %v", cmd.ID(), cmd.Token, err)
			continue
		}
		if cmd.Role != role {
			r.violate(ViolationMalformed, role, record.Offset, "command %s names role %q in the partition of role %q", cmd.ID(), cmd.Role, role)
			continue
		}
		if cmd.Part < 0 || cmd.Part >= cmd.PartCount() {
			r.violate(ViolationMalformed, role, record.Offset, "command %s has part %d of %d", cmd.ID(), cmd.Part, cmd.PartCount())
			continue
		}
		c := located{role: role, partition: record.Partition, offset: record.Offset, cmd: cmd, token: token}
		stream = append(stream, c)
		writer := fmt.Sprintf("%s/%d", cmd.Member, cmd.Incarnation)
		w := walks[record.Partition]
		if w == nil {
			w = &partitionWalk{ended: make(map[coordination.FencingToken]string), lastSeq: make(map[string]located)}
			walks[record.Partition] = w
		}

		switch {
		case w.haveCurrent && token == w.current:
			if writer != w.currentWriter {
				r.violate(ViolationSharedToken, role, record.Offset,
					"command %s of %s under term %s, which %s wrote under", cmd.ID(), writer, token, w.currentWriter)
			}
		case w.ended[token] != "":
			r.violate(ViolationInterleave, role, record.Offset,
				"command %s of term %s appears after term %s of %s began", cmd.ID(), token, w.current, w.currentWriter)
		default:
			if w.haveCurrent {
				w.ended[w.current] = w.currentWriter
			}
			if !terms[token] {
				terms[token] = true
				report.Terms++
				if len(terms) > 1 {
					r.LeadershipChanges++
				}
				if !termOf[cmd.Member][cmd.Token] {
					r.violate(ViolationTermWithoutLease, role, record.Offset,
						"command %s opens term %s, under which %s wrote no lease record", cmd.ID(), token, cmd.Member)
				}
			}
			w.current, w.currentWriter, w.haveCurrent = token, writer, true
		}
		if prev, ok := writers[cmd.Token]; ok && prev != writer {
			r.violate(ViolationSharedToken, role, record.Offset, "token %s written by %s and %s", token, prev, writer)
		}
		writers[cmd.Token] = writer
		if prev, ok := w.lastSeq[writer]; ok && (cmd.Seq < prev.cmd.Seq || cmd.Seq == prev.cmd.Seq && cmd.Part <= prev.cmd.Part) {
			if cmd.ID() != prev.cmd.ID() || cmd.Part != prev.cmd.Part { // the same part twice is a duplicate, found below
				r.violate(ViolationReorder, role, record.Offset,
					"command %s appears after command %s at offset %d", cmd.ID(), prev.cmd.ID(), prev.offset)
			}
		}
		w.lastSeq[writer] = c
	}

	// The lease terms of the role, in commit order, never go back: a lease
	// record of a term whose successor already wrote a lease record is a
	// regression.
	var currentLease coordination.FencingToken
	haveLease := false
	endedLease := make(map[coordination.FencingToken]bool)
	distinct := make(map[coordination.FencingToken]bool)
	for _, lease := range in.Leases[role] {
		if lease.Tombstone {
			continue
		}
		tok := lease.Lease.Token
		distinct[tok] = true
		switch {
		case haveLease && tok == currentLease:
		case endedLease[tok]:
			r.violate(ViolationLeaseRegress, role, lease.Offset,
				"lease of %s under %s appears after a lease under %s", lease.Lease.Member, tok, currentLease)
		default:
			if haveLease {
				endedLease[currentLease] = true
			}
			currentLease, haveLease = tok, true
		}
	}
	report.LeaseTerms = len(distinct)
	r.LeaseTerms += len(distinct)
	r.Commands += len(stream)
	r.Roles = append(r.Roles, report)
	return stream
}

// checkAcks matches the ack and event logs against the command streams.
func checkAcks(in CheckInput, byID map[CommandID][]located, starts map[string]map[string]int64, r *Report) {
	named := make(map[CommandID]bool)
	for _, ack := range in.Acks {
		id := ack.ID()
		named[id] = true
		r.Acknowledged++
		seen := byID[id]
		if len(seen) == 0 {
			r.Lost = append(r.Lost, fmt.Sprintf("%s (role %s, token %s, acked at %s)", id, ack.Role, ack.Token, formatMillis(ack.AckMillis)))
			continue
		}
		if c := seen[0]; c.role != ack.Role || c.cmd.Token != ack.Token {
			r.violate(ViolationAckMismatch, c.role, c.offset, "command %s acked for role %s under %s, present for role %s under %s",
				id, ack.Role, ack.Token, c.role, c.cmd.Token)
		}
	}
	for _, ev := range in.Events {
		id := CommandID{Member: ev.Member, Incarnation: ev.Incarnation, Seq: ev.Seq}
		switch ev.Kind {
		case EventFenced:
			r.Refused++
			named[id] = true
			fence := attributeFence(in, ev, starts[ev.Role])
			r.Fences = append(r.Fences, fence)
			r.FenceCauses.add(fence.Cause)
			if fence.Cause == FenceOwnLateCopy || fence.Cause == FenceUnexplained {
				r.SelfFenced++
			}
			if ev.Seq == 0 {
				continue
			}
			for _, c := range byID[id] {
				r.violate(ViolationRefusedVisible, c.role, c.offset, "command %s was refused with ErrFenced at %s, and is present", id, formatMillis(ev.WallMillis))
			}
		case EventWriteError:
			r.Unknown++
			named[id] = true
			if len(byID[id]) > 0 {
				r.UnknownPresent++
			}
		case EventWriteFailed:
			r.NotCommitted++
			named[id] = true
			if len(byID[id]) > 0 {
				c := byID[id][0]
				r.violate(ViolationFalseReport, c.role, c.offset, "command %s is present, and its write returned at %s an error that says nothing committed: %s",
					id, formatMillis(ev.WallMillis), ev.Error)
			}
		}
	}
	for id := range byID {
		if !named[id] {
			r.Unacknowledged++
		}
	}
	slices.Sort(r.Lost)
}

// termStarts returns, per role, the earliest instant at which each term is
// known to have begun: its acquired event, or its first command, whichever
// is earlier (a member killed after its acquisition logs no event).
func termStarts(in CheckInput, streams map[string][]located) map[string]map[string]int64 {
	out := make(map[string]map[string]int64)
	note := func(role, token string, at int64) {
		if out[role] == nil {
			out[role] = make(map[string]int64)
		}
		if prev, ok := out[role][token]; !ok || at < prev {
			out[role][token] = at
		}
	}
	for _, ev := range in.Events {
		if ev.Kind == EventAcquired {
			note(ev.Role, ev.Token, ev.WallMillis)
		}
	}
	for role, stream := range streams {
		for _, c := range stream {
			note(role, c.cmd.Token, c.cmd.WallMillis)
		}
	}
	return out
}

// measureFailovers times, for each pause, kill and cut of a member that was
// leading a role when the fault began, the first command of the next term.
func measureFailovers(in CheckInput, streams map[string][]located, r *Report) {
	base := in.Config.FailoverBound()
	r.FailoverStats.BoundMillis = base.Milliseconds()
	leaseMs := in.Config.Lease.Milliseconds()
	var measured []int64
	for _, f := range in.Faults {
		if f.Kind != FaultPause && f.Kind != FaultKill && f.Kind != FaultCut {
			continue
		}
		for _, role := range in.Roles {
			stream := streams[role]
			// The leader at the fault: the writer of the last command built
			// at or before the fault, if it is the target and wrote recently.
			last := -1
			for i, c := range stream {
				if c.cmd.WallMillis <= f.StartMillis && (last < 0 || c.cmd.WallMillis >= stream[last].cmd.WallMillis) {
					last = i
				}
			}
			if last < 0 || stream[last].cmd.Member != f.Target || f.StartMillis-stream[last].cmd.WallMillis > leaseMs {
				continue
			}
			term := stream[last].token
			skew := maxSkew(in.Faults, f.StartMillis-leaseMs, f.StartMillis+base.Milliseconds())
			bound := base.Milliseconds() + 2*skew
			fo := Failover{Fault: f.Index, Kind: f.Kind, Target: f.Target, Role: role, StartMillis: f.StartMillis, BoundMillis: bound}
			next, retained := -1, false
			for i, c := range stream {
				if c.cmd.WallMillis <= f.StartMillis {
					continue
				}
				if c.token == term {
					retained = true
					break
				}
				next = i // another term, the next in commit order
				break
			}
			switch {
			case retained:
				fo.Outcome = OutcomeRetained
				r.FailoverStats.Retained++
			case next < 0:
				fo.Outcome = OutcomeUnresolved
				if in.Config.EndMillis != 0 && f.StartMillis+bound > in.Config.EndMillis {
					fo.Outcome, fo.Reason = OutcomeExcluded, "the run ended within the bound"
					r.FailoverStats.Excluded++
				} else {
					r.FailoverStats.Unresolved++
				}
			default:
				fo.Millis = stream[next].cmd.WallMillis - f.StartMillis
				if reason := overlapsBrokerRestart(in.Faults, f.StartMillis-leaseMs, f.StartMillis+fo.Millis); reason != "" {
					fo.Outcome, fo.Reason = OutcomeExcluded, reason
					r.FailoverStats.Excluded++
					break
				}
				fo.Outcome = OutcomeMeasured
				measured = append(measured, fo.Millis)
				if fo.Millis > bound {
					r.FailoverStats.OverBound++
				}
			}
			r.Failovers = append(r.Failovers, fo)
		}
	}
	slices.Sort(measured)
	r.FailoverStats.Measured = len(measured)
	if len(measured) > 0 {
		r.FailoverStats.P50Millis = percentile(measured, 50)
		r.FailoverStats.P99Millis = percentile(measured, 99)
		r.FailoverStats.MaxMillis = measured[len(measured)-1]
	}
}

// maxSkew returns the largest clock offset of a skew fault in force at any
// instant of [from, to], in milliseconds.
func maxSkew(faults []Fault, from, to int64) int64 {
	var out int64
	for _, f := range faults {
		if f.Kind != FaultSkew || f.EndMillis < from || f.StartMillis > to {
			continue
		}
		out = max(out, abs(f.SkewMillis))
	}
	return out
}

// overlapsBrokerRestart names a broker restart that overlaps [from, to].
func overlapsBrokerRestart(faults []Fault, from, to int64) string {
	for _, f := range faults {
		if f.Kind == FaultBrokerRestart && f.StartMillis <= to && f.EndMillis >= from {
			return fmt.Sprintf("broker restart %d at %s overlaps", f.Index, formatMillis(f.StartMillis))
		}
	}
	return ""
}

// percentile returns the nearest-rank percentile of a sorted slice.
func percentile(sorted []int64, p int) int64 {
	rank := (p*len(sorted) + 99) / 100
	return sorted[min(max(rank, 1), len(sorted))-1]
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

func (r *Report) violate(kind, role string, offset int64, format string, args ...any) {
	r.Violations = append(r.Violations, Violation{Kind: kind, Role: role, Offset: offset, Detail: fmt.Sprintf(format, args...)})
}

func sortViolations(v []Violation) {
	slices.SortStableFunc(v, func(a, b Violation) int {
		return cmp.Or(cmp.Compare(a.Role, b.Role), cmp.Compare(a.Offset, b.Offset), cmp.Compare(a.Kind, b.Kind))
	})
}

// formatMillis writes a host instant as a UTC clock time with milliseconds.
func formatMillis(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("15:04:05.000")
}
