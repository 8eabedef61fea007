package demo

// A member of demo: its campaign, the numbered commands that it
// dispatches through the guarded write while it leads, and the ledger of
// the commands that the broker acknowledged.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/krabka-io/krabka-streams-go/cmd/krabka-coord/internal/clifmt"
	"github.com/krabka-io/krabka-streams-go/coordination"
)

// demoMember is one of the three members.
type demoMember struct {
	d         *demo
	name      string
	id        coordination.MemberID
	transport *coordination.KafkaTransport
	gate      *gatedTransport

	mu         sync.Mutex
	cancel     context.CancelFunc // ends the campaign and the dispatcher
	done       chan struct{}      // closed when the campaign goroutine returns
	leadership *coordination.Leadership
	token      coordination.FencingToken
	acks       int // commands of the current term
	stopped    chan struct{}
	electedAt  time.Time // of the current term
}

func (m *demoMember) electedTime() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.electedAt
}

// campaign starts AcquireLeadership; on election the member dispatches
// commands until its leadership ends.
func (m *demoMember) campaign(parent context.Context) {
	ctx, cancel := context.WithCancel(parent)
	done := make(chan struct{})
	stopped := make(chan struct{})
	m.mu.Lock()
	m.cancel, m.done, m.stopped = cancel, done, stopped
	m.mu.Unlock()
	go func() {
		defer close(done)
		l, err := coordination.AcquireLeadership(ctx, m.gate, m.d.role, m.id, m.d.options...)
		if err != nil {
			return
		}
		m.mu.Lock()
		m.leadership, m.token, m.acks, m.electedAt = l, l.Token(), 0, time.Now()
		m.mu.Unlock()
		m.d.out.add(m.name, "elected", l.Token().String(), "leader", m.d.electedNote(m, l))
		m.d.elected <- m
		m.dispatch(ctx, l, stopped)
	}()
}

// dispatch writes numbered commands through the guarded write until the
// leadership ends, the dispatcher is stopped, or ctx ends.
func (m *demoMember) dispatch(ctx context.Context, l *coordination.Leadership, stopped <-chan struct{}) {
	seq := m.d.ledger.last() + 1
	token := l.Token()
	for {
		select {
		case <-ctx.Done():
			return
		case <-stopped:
			return
		case <-l.Done():
			return
		case <-time.After(m.d.opts.Interval):
		}
		if !m.gate.waitAwake(ctx) {
			return
		}
		value, _ := json.Marshal(commandJSON{Seq: seq, Member: m.name, Token: token.String()})
		write, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := l.Write(write, coordination.GuardedRecord{Topic: m.d.commands, Partition: 0, Key: fmt.Appendf(nil, "%d", seq), Value: value})
		cancel()
		switch {
		case err == nil:
			m.d.ledger.ack(commandJSON{Seq: seq, Member: m.name, Token: token.String()})
			m.mu.Lock()
			m.acks++
			m.mu.Unlock()
			m.d.out.add(m.name, "command", token.String(), "leader", fmt.Sprintf("dispatches command %d (guarded write committed)", seq))
			seq++
		case errors.Is(err, coordination.ErrFenced):
			code := brokerCode(err)
			m.d.mu.Lock()
			m.d.refusedSeq, m.d.refusedToken, m.d.refusedCode = seq, token.String(), code
			m.d.mu.Unlock()
			by := "refused"
			if code != "" {
				by = "refused by the broker with " + code
			}
			m.d.out.add(m.name, "fenced", token.String(), "-", fmt.Sprintf("command %d %s: ErrFenced, so it stops leading", seq, by))
			m.d.fenced <- m
			return
		case errors.Is(err, coordination.ErrProducerLost), errors.Is(err, coordination.ErrNotAuthorized):
			m.d.out.add(m.name, "lost", token.String(), "-", fmt.Sprintf("command %d failed, and the leadership ended: %s", seq, clifmt.OneLine(err.Error())))
			return
		case errors.Is(err, coordination.ErrNotHeld), ctx.Err() != nil:
			return
		case errors.Is(err, coordination.ErrOutcomeUnknown):
			// It may commit yet: sending it again could dispatch it twice,
			// and the next number would leave a gap. The demo's dispatcher
			// stops, as a real one would until it read the command topic.
			m.d.out.add(m.name, "unknown", token.String(), "leader", fmt.Sprintf("command %d: outcome unknown (%s); the dispatcher stops", seq, clifmt.OneLine(err.Error())))
			return
		default:
			m.d.out.add(m.name, "retry", token.String(), "leader", fmt.Sprintf("command %d failed (%s); retrying", seq, clifmt.OneLine(err.Error())))
		}
	}
}

// brokerCode names the Kafka error code in err, or "".
func brokerCode(err error) string {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Message
	}
	return ""
}

// stopDispatch stops the dispatcher of the current term.
func (m *demoMember) stopDispatch() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped != nil {
		close(m.stopped)
		m.stopped = nil
	}
}

// stop ends the member: a leader resigns, a waiting member leaves the
// roster.
func (m *demoMember) stop() {
	m.stopDispatch()
	m.gate.wake()
	m.mu.Lock()
	cancel, done, l := m.cancel, m.done, m.leadership
	m.mu.Unlock()
	if l != nil && l.Err() == nil {
		m.d.out.add(m.name, "resign", l.Token().String(), "leader", "resigns at the end of the demo")
		ctx, cancelResign := context.WithTimeout(context.Background(), 5*time.Second)
		if err := l.Resign(ctx); err != nil {
			m.d.out.add(m.name, "error", l.Token().String(), "-", "resignation failed: "+clifmt.OneLine(err.Error()))
		}
		cancelResign()
	}
	if cancel != nil {
		cancel()
		<-done
	}
}

func (m *demoMember) currentLeadership() *coordination.Leadership {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.leadership
}

func (m *demoMember) currentToken() coordination.FencingToken {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.token
}

func (m *demoMember) termAcks() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.acks
}

// ledger is the list of the commands that a leader dispatched and the
// broker acknowledged. A new leader continues the numbering from it.
type ledger struct {
	mu       sync.Mutex
	commands []commandJSON
}

func (l *ledger) ack(c commandJSON) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.commands = append(l.commands, c)
}

func (l *ledger) last() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.commands) == 0 {
		return 0
	}
	return l.commands[len(l.commands)-1].Seq
}

func (l *ledger) all() []commandJSON {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]commandJSON(nil), l.commands...)
}

// commandJSON is one command: the value of a record of the command topic.
type commandJSON struct {
	Seq    int    `json:"seq"`
	Member string `json:"member"`
	Token  string `json:"token"`
	Offset int64  `json:"offset"`
}
