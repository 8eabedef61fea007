// Package kfakefault faults one request of a kfake cluster
// (github.com/twmb/franz-go/pkg/kfake), the fast twin of the request
// nemesis of the fault harness (internal/chaos, whose Kafka-aware proxy
// does the same to a real broker): it delays one request of an API key,
// loses its answer after the cluster applied it, holds it until the client
// sent it again and then applies it late, applies it twice, answers it
// with an error code (applied or not), or breaks the client's connection
// at once and applies the request late, after the client's resend.
//
// It rests on kfake.Cluster.ControlKey (one control function per fault),
// SleepControl (the fault waits while the cluster serves every other
// connection) and KeepControl / DropControl (an observer that counts the
// requests of the key, for the resend of a hold). A request that the fault
// applies apart from its client goes to the cluster from a client of the
// injector's own, to the node that received it.
package kfakefault

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/krabka-io/krabka-streams-go/internal/kafkacodes"
)

// Mode is what a [Fault] does to the request it takes.
type Mode string

const (
	// Delay serves the request after Fault.Delay.
	Delay Mode = "delay"

	// LoseAnswer applies the request and closes the client's connection
	// instead of answering: the client cannot know that it was applied.
	LoseAnswer Mode = "lose-answer"

	// Hold keeps the request until the client sent a request of the same
	// key again (its resend, on another connection), or until Fault.Delay,
	// then applies it, late, and closes the connection that sent it.
	Hold Mode = "hold"

	// Duplicate applies the request twice: once apart, then as the client
	// sent it; the client gets the second answer.
	Duplicate Mode = "duplicate"

	// ErrorCode answers the request with Fault.Code, without applying it
	// (see [ErrorResponse] for the keys it knows).
	ErrorCode Mode = "error"

	// AppliedError applies the request apart, then answers the client
	// with Fault.Code: a broker that applied the request and answered
	// with an error (internal/kafkacodes.Applied lists the codes Kafka
	// answers so).
	AppliedError Mode = "applied-error"

	// ResetHold closes the client's connection at once, without applying
	// the request (the client sees a broken connection, not a timeout),
	// and applies it apart, late, once Fault.After more requests of the
	// key reached the cluster (the client's resend, and the next ones), or
	// after Fault.Delay: a request that Kafka read whole and applied after
	// its connection closed, or that a proxy still delivered.
	ResetHold Mode = "reset-hold"
)

// Modes lists every mode.
var Modes = []Mode{Delay, LoseAnswer, Hold, Duplicate, ErrorCode, AppliedError, ResetHold}

// Fault is one fault of one request.
type Fault struct {
	// Key is the API key of the request the fault takes.
	Key kmsg.Key

	// Mode says what it does. Delay is the delay of Delay and the longest
	// hold of Hold and ResetHold (0: 10 s). Code is the error code of
	// ErrorCode. After is the number of requests of Key that ResetHold
	// lets reach the cluster before it applies its own (0: 2).
	Mode  Mode
	Delay time.Duration
	Code  int16
	After int

	// Match, if not nil, picks the request among those of Key: the fault
	// takes the first request it accepts (for example an EndTxn that
	// commits).
	Match func(kmsg.Request) bool
}

// Hit is what a fault did.
type Hit struct {
	// Key and Version name the request it took.
	Key     int16
	Version int16

	// Applied counts the times the fault had the cluster apply the
	// request apart from its client (a lost answer: 1; a hold: 1, late; a
	// duplicate: 1, beside the client's own). Resent reports that a hold
	// saw the client's resend before it applied the request.
	Applied int
	Resent  bool

	// Err is the error of a request the fault applied apart, if any.
	Err error
}

// Injector faults the requests of one kfake cluster. It is safe for
// concurrent use; Close ends its client.
type Injector struct {
	cluster *kfake.Cluster
	side    *kgo.Client
}

// New builds an injector of the cluster, with a client of its own for the
// requests that a fault applies apart.
func New(cluster *kfake.Cluster) (*Injector, error) {
	side, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...))
	if err != nil {
		return nil, fmt.Errorf("kfakefault: %w", err)
	}
	return &Injector{cluster: cluster, side: side}, nil
}

// Close closes the injector's client. A fault still armed stays on the
// cluster, and can no longer apply a request apart (its Hit says so).
func (i *Injector) Close() { i.side.Close() }

// Armed is one fault on the cluster.
type Armed struct {
	done chan struct{}
	hit  Hit
	stop atomic.Bool // the observer of a hold ends
}

// Done closes when the fault took a request and finished with it.
func (a *Armed) Done() <-chan struct{} { return a.done }

// Wait waits for the fault to finish, within ctx, and returns what it did.
func (a *Armed) Wait(ctx context.Context) (Hit, error) {
	select {
	case <-a.done:
		return a.hit, nil
	case <-ctx.Done():
		return Hit{}, fmt.Errorf("kfakefault: no request took the fault: %w", ctx.Err())
	}
}

// errLost is the error a control function returns to close the client's
// connection without an answer.
var errLost = errors.New("kfakefault: the answer is lost")

// Inject arms the fault: the next request of its key (that Match accepts)
// takes it.
func (i *Injector) Inject(f Fault) *Armed {
	a := &Armed{done: make(chan struct{})}
	if f.Delay <= 0 {
		f.Delay = 10 * time.Second
	}
	var seen atomic.Int64 // requests of the key, for the resend of a hold
	if f.After <= 0 {
		f.After = 2
	}
	if f.Mode == Hold || f.Mode == ResetHold {
		i.cluster.ControlKey(f.Key.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
			if a.stop.Load() {
				i.cluster.DropControl()
			} else {
				i.cluster.KeepControl()
			}
			seen.Add(1)
			return nil, nil, false
		})
	}
	var taken atomic.Bool
	i.cluster.ControlKey(f.Key.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if f.Match != nil && !f.Match(req) || !taken.CompareAndSwap(false, true) {
			return nil, nil, false // not ours: the fault stays armed, or is busy with its request
		}
		node := i.cluster.CurrentNode()
		a.hit.Key, a.hit.Version = req.Key(), req.GetVersion()
		async := f.Mode == ResetHold // a goroutine of the fault finishes it
		defer func() {
			if !async {
				a.stop.Store(true)
				close(a.done)
			}
		}()
		i.cluster.DropControl()
		apply := func() {
			a.hit.Applied++
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := i.applyAsSent(ctx, node, req); err != nil {
				a.hit.Err = errors.Join(a.hit.Err, err)
			}
		}
		switch f.Mode {
		case Delay:
			i.cluster.SleepControl(func() { time.Sleep(f.Delay) })
			return nil, nil, false
		case LoseAnswer:
			i.cluster.SleepControl(apply)
			return nil, errLost, true
		case Hold:
			before := seen.Load()
			i.cluster.SleepControl(func() {
				deadline := time.Now().Add(f.Delay)
				for seen.Load() <= before && time.Now().Before(deadline) {
					time.Sleep(5 * time.Millisecond)
				}
				a.hit.Resent = seen.Load() > before
				time.Sleep(50 * time.Millisecond) // the resend is served first
				apply()
			})
			return nil, errLost, true
		case Duplicate:
			i.cluster.SleepControl(apply)
			return nil, nil, false
		case ResetHold:
			before := seen.Load()
			go func() { // owned by the fault: it ends once the request is applied, by f.Delay at the latest
				defer close(a.done)
				defer a.stop.Store(true)
				deadline := time.Now().Add(f.Delay)
				for seen.Load()-before < int64(f.After) && time.Now().Before(deadline) {
					time.Sleep(5 * time.Millisecond)
				}
				a.hit.Resent = seen.Load() > before
				apply()
			}()
			return nil, errLost, true
		case ErrorCode, AppliedError:
			resp, err := ErrorResponse(req, f.Code)
			if err != nil {
				a.hit.Err = err
				return nil, nil, false
			}
			if f.Mode == AppliedError {
				i.cluster.SleepControl(apply)
			}
			return resp, nil, true
		}
		a.hit.Err = fmt.Errorf("kfakefault: unknown mode %q", f.Mode)
		return nil, nil, false
	})
	return a
}

// applyAsSent sends req to node at the version its client sent it, on a
// connection of its own, and reads the answer. A kgo client would send it
// at the highest version the two sides share instead, which for a Produce
// of a client capped below v13 names its topics by an id the request does
// not carry (UNKNOWN_TOPIC_ID: not applied). The node's address comes from
// the injector's client's metadata.
func (i *Injector) applyAsSent(ctx context.Context, node int32, req kmsg.Request) error {
	meta, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, i.side)
	if err != nil {
		return fmt.Errorf("kfakefault: the address of node %d: %w", node, err)
	}
	addr := ""
	for _, b := range meta.Brokers {
		if b.NodeID == node {
			addr = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
		}
	}
	if addr == "" {
		return fmt.Errorf("kfakefault: node %d is not in the metadata", node)
	}
	conn, err := new(net.Dialer).DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("kfakefault: %w", err)
	}
	defer conn.Close()
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
	}
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("kfakefault")).AppendRequest(nil, req, 1)
	if _, err := conn.Write(frame); err != nil {
		return fmt.Errorf("kfakefault: write %s: %w", kmsg.NameForKey(req.Key()), err)
	}
	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		return fmt.Errorf("kfakefault: the answer of %s: %w", kmsg.NameForKey(req.Key()), err)
	}
	if _, err := io.CopyN(io.Discard, conn, int64(binary.BigEndian.Uint32(size[:]))); err != nil {
		return fmt.Errorf("kfakefault: the answer of %s: %w", kmsg.NameForKey(req.Key()), err)
	}
	return nil
}

// ErrorResponse builds the answer of req that carries code in every error
// field of the request's kind: internal/kafkacodes.ErrorResponse, which
// knows every key of the table of codes (kafkacodes.Codes). Another key is
// an error.
func ErrorResponse(req kmsg.Request, code int16) (kmsg.Response, error) {
	resp, err := kafkacodes.ErrorResponse(req, code)
	if err != nil {
		return nil, fmt.Errorf("kfakefault: %w", err)
	}
	return resp, nil
}
