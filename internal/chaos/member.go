package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// MemberConfig configures one member process.
type MemberConfig struct {
	// ID is the member id; a restarted member keeps it.
	ID string

	// Incarnation counts the processes of this member id, from 1.
	Incarnation int

	// Roles lists the roles the member competes for. The leader of Roles[i]
	// writes its commands to the partitions [CommandPartitions] names.
	Roles []string

	// Spread is the number of partitions of CommandTopic per role. With 2
	// or more, each command is one Write of 2 or 3 records (by the parity
	// of its sequence number) spread over the role's partitions, so that a
	// torn transaction shows; 0 or 1 writes one record on partition i.
	Spread int

	// CommandTopic is the topic of the commands.
	CommandTopic string

	// Options go to every AcquireLeadership call: the lease timings, the
	// state topic, the clock, the logger.
	Options []coordination.Option

	// Clock is the clock that Options carry; the member stamps each command
	// with its reading as well as with the host time.
	Clock coordination.Clock

	// CommandInterval is the gap between two commands of one leadership.
	CommandInterval time.Duration

	// WriteTimeout bounds one guarded write.
	WriteTimeout time.Duration

	// RetryInterval is the pause after an AcquireLeadership call that failed
	// for another reason than the end of the context.
	RetryInterval time.Duration

	// Successor, if not nil, names at a stop the member that the member
	// hands each role it leads to (Leadership.TransferTo) instead of
	// resigning; "" resigns, and so does a transfer that fails. The
	// rolling-restart run and the mixed-release run set it
	// ([OrchestrateRolling], [OrchestrateMixed]).
	Successor func() string

	// TransferRequest, if not nil, is polled while the member leads (at
	// most every 50 ms): a name it returns is handed to
	// Leadership.TransferTo at once, while the member goes on writing, and
	// the call log has the outcome ([CallTransfer]). The rolling run asks
	// so for the refused transfers (members/<id>.transfer).
	TransferRequest func() string

	// Acks receives one line per acknowledged command, and Events one line
	// per event. Both are required. Calls, if not nil, receives one [Call]
	// line per exported call of package coordination, and History, if not
	// nil, one [HistoryEntry] at the invocation and one at the return of
	// every acquisition and guarded write.
	Acks, Events, Calls, History *LineLog
}

// Member competes for the roles of a run and writes commands while it leads.
type Member struct {
	config MemberConfig
	// partitions holds the command partitions of each role, by index
	// ([CommandPartitions]).
	partitions [][]int32
	seq        atomic.Int64
	history    *historian
}

// NewMember checks the config and builds a member.
func NewMember(config MemberConfig) (*Member, error) {
	switch {
	case config.ID == "":
		return nil, errors.New("chaos: member without an id")
	case len(config.Roles) == 0:
		return nil, errors.New("chaos: member without roles")
	case config.CommandTopic == "":
		return nil, errors.New("chaos: member without a command topic")
	case config.Acks == nil || config.Events == nil:
		return nil, errors.New("chaos: member without an ack log or an event log")
	case config.CommandInterval <= 0 || config.WriteTimeout <= 0:
		return nil, errors.New("chaos: member needs a command interval and a write timeout above zero")
	}
	if config.Clock == nil {
		config.Clock = coordination.SystemClock{}
	}
	if config.Incarnation < 1 {
		config.Incarnation = 1
	}
	if config.RetryInterval <= 0 {
		config.RetryInterval = 250 * time.Millisecond
	}
	m := &Member{config: config}
	for i := range config.Roles {
		partitions, err := CommandPartitions(i, len(config.Roles), config.Spread)
		if err != nil {
			return nil, err
		}
		m.partitions = append(m.partitions, partitions)
	}
	if config.History != nil {
		m.history = &historian{log: config.History, member: config.ID, incarnation: config.Incarnation}
	}
	return m, nil
}

// Run competes for every role over the transport until ctx ends. It runs
// one goroutine per role and returns when all of them have returned: a
// leadership it holds at the end is resigned first.
func (m *Member) Run(ctx context.Context, transport coordination.Transport) error {
	m.event(Event{Kind: EventStart})
	var wg sync.WaitGroup
	for partition, name := range m.config.Roles {
		role, err := coordination.NewRole(name)
		if err != nil {
			return err
		}
		wg.Go(func() { m.compete(ctx, transport, role, partition) })
	}
	wg.Wait()
	m.event(Event{Kind: EventExit})
	return nil
}

// compete takes the role again and again until ctx ends.
func (m *Member) compete(ctx context.Context, transport coordination.Transport, role coordination.Role, partition int) {
	member, err := coordination.NewMemberID(m.config.ID)
	if err != nil {
		m.event(Event{Kind: EventAcquireError, Role: role.String(), Error: err.Error()})
		return
	}
	for ctx.Err() == nil {
		var leadership *coordination.Leadership
		n := m.history.invoke(OpAcquire, role.String(), 0, 0, "")
		err := m.Timed(ctx, CallAcquire, role.String(), func(ctx context.Context) (err error) {
			leadership, err = coordination.AcquireLeadership(ctx, transport, role, member, m.config.Options...)
			return err
		})
		if err != nil {
			m.history.done(OpAcquire, n, role.String(), 0, "", ResultFailed)
		} else {
			m.history.done(OpAcquire, n, role.String(), 0, leadership.Token().String(), ResultOK)
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			m.event(Event{Kind: EventAcquireError, Role: role.String(), Error: err.Error()})
			select {
			case <-ctx.Done():
				return
			case <-time.After(m.config.RetryInterval):
			}
			continue
		}
		m.event(Event{Kind: EventAcquired, Role: role.String(), Token: leadership.Token().String()})
		m.lead(ctx, leadership, partition)
	}
}

// lead writes commands under the leadership until it ends or ctx ends. On
// a refused write it stops at once: the next command could only be refused
// too, and the caller competes again.
func (m *Member) lead(ctx context.Context, leadership *coordination.Leadership, partition int) {
	role, token := leadership.Role().String(), leadership.Token().String()
	ticker := time.NewTicker(m.config.CommandInterval)
	defer ticker.Stop()
	// Requested transfers run beside the writes; lead waits for them.
	var transfers sync.WaitGroup
	defer transfers.Wait()
	var busy atomic.Bool
	var polled time.Time
	for {
		select {
		case <-ctx.Done():
			transfers.Wait()
			if m.handOver(ctx, leadership) {
				return
			}
			resign, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			err := m.Timed(resign, CallResign, role, leadership.Resign)
			cancel()
			m.event(Event{Kind: EventEnded, Role: role, Token: token, Error: errText(errors.Join(errors.New("shutdown"), err))})
			return
		case <-leadership.Done():
			m.event(Event{Kind: EventEnded, Role: role, Token: token, Error: errText(leadership.Err())})
			return
		case <-ticker.C:
		}
		if m.config.TransferRequest != nil && time.Since(polled) >= 50*time.Millisecond && !busy.Load() {
			polled = time.Now()
			if name := m.config.TransferRequest(); name != "" {
				busy.Store(true)
				transfers.Go(func() {
					defer busy.Store(false)
					m.transferNow(ctx, leadership, name)
				})
			}
		}
		cmd := Command{
			Role:        role,
			Member:      m.config.ID,
			Incarnation: m.config.Incarnation,
			Seq:         m.seq.Add(1),
			Token:       token,
			WallMillis:  time.Now().UnixMilli(),
			ClockMillis: m.config.Clock.NowMillis(),
		}
		if m.config.Spread > 1 {
			cmd.Parts = 2 + int(cmd.Seq%2)
		}
		records := m.commandRecords(cmd, partition)
		write, cancel := context.WithTimeout(ctx, m.config.WriteTimeout)
		n := m.history.invoke(OpWrite, role, cmd.Seq, cmd.Parts, token)
		err := m.Timed(write, CallWrite, role, func(ctx context.Context) error {
			return leadership.Write(ctx, records...)
		})
		cancel()
		result := writeResult(err)
		m.history.done(OpWrite, n, role, cmd.Seq, token, result)
		switch result {
		case ResultOK:
			if err := m.config.Acks.Append(Ack{Command: cmd, AckMillis: time.Now().UnixMilli()}); err != nil {
				panic(fmt.Sprintf("chaos: ack log: %v", err)) // an ack that is not logged breaks the check
			}
		case ResultNotHeld:
			// The leadership ended before the write: nothing was written.
			// Done is closed, and the next lap reports the end.
		case ResultFenced:
			m.event(Event{Kind: EventFenced, Role: role, Token: token, Seq: cmd.Seq, Error: err.Error()})
			return
		case ResultUnknown:
			m.event(Event{Kind: EventWriteError, Role: role, Token: token, Seq: cmd.Seq, Error: err.Error()})
		default:
			m.event(Event{Kind: EventWriteFailed, Role: role, Token: token, Seq: cmd.Seq, Error: err.Error()})
		}
	}
}

// commandRecords builds the cmd.PartCount() records of one command of the
// role of index role, part i on the i-th partition of the role (modulo
// their count), each carrying the command, its part index and the part
// count.
func (m *Member) commandRecords(cmd Command, role int) []coordination.GuardedRecord {
	partitions := m.partitions[role]
	parts := cmd.PartCount()
	records := make([]coordination.GuardedRecord, parts)
	for i := range parts {
		cmd.Part = i
		value, err := json.Marshal(cmd)
		if err != nil {
			panic(err) // a struct of strings and integers always encodes
		}
		records[i] = coordination.GuardedRecord{
			Topic: m.config.CommandTopic, Partition: int(partitions[i%len(partitions)]), Key: []byte(cmd.Role), Value: value,
		}
	}
	return records
}

// Timed runs one call of package coordination under ctx and logs it to the
// call log: its budget (the time to the deadline of ctx), its duration, and
// how long after the end of ctx it returned.
func (m *Member) Timed(ctx context.Context, call, role string, f func(context.Context) error) error {
	start := time.Now()
	var endedAt atomic.Int64
	stop := context.AfterFunc(ctx, func() { endedAt.Store(time.Now().UnixNano()) })
	err := f(ctx)
	end := time.Now()
	stop()
	if m.config.Calls == nil {
		return err
	}
	c := Call{
		WallMillis: start.UnixMilli(), Member: m.config.ID, Incarnation: m.config.Incarnation, Role: role,
		Call: call, TookMillis: end.Sub(start).Milliseconds(), OverMillis: -1, Error: errText(err),
	}
	deadline, bounded := ctx.Deadline()
	if bounded {
		c.BudgetMillis = max(deadline.Sub(start).Milliseconds(), 0)
	}
	switch {
	case bounded && end.After(deadline):
		c.OverMillis = end.Sub(deadline).Milliseconds()
	case endedAt.Load() != 0:
		c.OverMillis = end.Sub(time.Unix(0, endedAt.Load())).Milliseconds()
	}
	_ = m.config.Calls.Append(c)
	return err
}

func (m *Member) event(ev Event) {
	ev.WallMillis = time.Now().UnixMilli()
	ev.Member, ev.Incarnation = m.config.ID, m.config.Incarnation
	_ = m.config.Events.Append(ev)
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
