package device

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// Gate admits the commands of one role's leader only. A device, or the
// dispatcher in front of it, asks the gate about the token of each command
// ([Command.Token], or a token that a leader sent along with an RPC) and
// acts only when [Gate.Admit] returns nil.
//
// Authority is equality with the token that the transaction coordinator
// holds for the role now ([coordination.DescribeLeadership]); the gate
// never ranks tokens. It caches that token: one request per leadership
// change and per unknown token, not one per command. The package doc says
// why ("Equality, not order") and what a device gets ("The cache").
//
// A Gate is safe for concurrent use.
type Gate struct {
	coordinator coordination.Coordinator
	role        coordination.Role

	mu        sync.Mutex
	current   coordination.FencingToken // the coordinator's token as the last refresh saw it
	held      bool                      // a member has taken the role, per the last refresh
	refreshed bool                      // a refresh has answered
	refused   map[coordination.FencingToken]struct{}
	seq       uint64        // the number of the newest refresh started
	inflight  *gateRefresh  // nil when no refresh runs
	bound     time.Duration // the bound of one refresh
}

// gateRefresh is one DescribeEpoch of the gate, shared by every caller
// that waits for it.
type gateRefresh struct {
	seq  uint64
	done chan struct{} // closed when it answered
	err  error
}

// gateRefreshBound bounds one refresh of a [Gate].
const gateRefreshBound = 5 * time.Second

// gateRefusedCap bounds the memory of refused tokens of a [Gate].
const gateRefusedCap = 4096

// NewGate builds the gate of a role over a coordinator, which is any
// [coordination.Transport] or an adapter of its own: the gate calls only DescribeEpoch
// (over Kafka it needs DESCRIBE on the transactional id of the role, and
// joins no group). The first Admit asks the coordinator. It returns an
// error for a nil coordinator and the zero [coordination.Role].
func NewGate(coordinator coordination.Coordinator, role coordination.Role) (*Gate, error) {
	if coordinator == nil {
		return nil, errors.New("device: NewGate: nil coordination.Coordinator")
	}
	if role.IsZero() {
		return nil, errors.New("device: NewGate: the zero coordination.Role: build the role with coordination.NewRole")
	}
	return &Gate{coordinator: coordinator, role: role, refused: make(map[coordination.FencingToken]struct{}), bound: gateRefreshBound}, nil
}

// Role returns the role whose leader the gate admits.
func (g *Gate) Role() coordination.Role { return g.role }

// Admit reports whether a command under token comes from the leader of the
// role: nil when token is the coordinator's token now. It returns a
// *[FencedTokenError], which wraps [coordination.ErrFenced], for any other token:
// a deposed leader's, [coordination.NoEpoch], the pair of a producer that holds no
// leadership, or any token of a role that no member has taken. When it
// cannot ask the coordinator (ctx ended, the refresh bound passed, the
// cluster refused), it returns that error, wrapped: not a refusal and not
// an admission, so the caller must not act (fail closed) and may retry.
//
// Admit on the cached token returns at once; an unknown token costs one
// refresh, shared with concurrent calls. It is safe for concurrent use.
func (g *Gate) Admit(ctx context.Context, token coordination.FencingToken) error {
	g.mu.Lock()
	arrival := g.seq
	for {
		if g.refreshed && g.held && token == g.current {
			g.mu.Unlock()
			return nil
		}
		if _, refused := g.refused[token]; refused || token == coordination.NoEpoch {
			err := g.refusal(token)
			g.mu.Unlock()
			return err
		}
		// An unseen token: only a refresh that began after this call
		// arrived may judge it, because the token may have been minted
		// after an earlier refresh asked.
		refresh := g.inflight
		if refresh == nil {
			refresh = g.startLocked()
		}
		g.mu.Unlock()
		select {
		case <-refresh.done:
		case <-ctx.Done():
			return fmt.Errorf("device: admit token %s for role %s: waiting for the coordinator's token: %w", token, g.role, context.Cause(ctx))
		}
		g.mu.Lock()
		if refresh.seq <= arrival {
			continue // it began before this call: ask again
		}
		if refresh.err != nil && !(g.refreshed && g.held && token == g.current) {
			g.mu.Unlock()
			return fmt.Errorf("device: admit token %s for role %s: the token is unknown and the coordinator did not answer, so the command is neither admitted nor refused: %s%w", token, g.role, strings.TrimPrefix(refresh.err.Error(), "coordination: "), errorOnly{refresh.err})
		}
		if g.refreshed && g.held && token == g.current {
			g.mu.Unlock()
			return nil
		}
		g.refuseLocked(token)
		err := g.refusal(token)
		g.mu.Unlock()
		return err
	}
}

// startLocked starts a refresh. Its goroutine ends within the refresh
// bound. The caller holds g.mu.
func (g *Gate) startLocked() *gateRefresh {
	g.seq++
	refresh := &gateRefresh{seq: g.seq, done: make(chan struct{})}
	g.inflight = refresh
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), g.bound)
		status, err := coordination.DescribeLeadership(ctx, g.coordinator, g.role)
		cancel()
		g.mu.Lock()
		defer g.mu.Unlock()
		refresh.err = err
		if err == nil {
			if g.refreshed && g.held && (!status.Held || status.Token != g.current) {
				g.refuseLocked(g.current) // superseded: never current again
			}
			g.current, g.held, g.refreshed = status.Token, status.Held, true
		}
		g.inflight = nil
		close(refresh.done)
	}()
	return refresh
}

// refuseLocked remembers a token that the coordinator does not hold. The
// caller holds g.mu.
func (g *Gate) refuseLocked(token coordination.FencingToken) {
	if len(g.refused) >= gateRefusedCap {
		clear(g.refused)
	}
	g.refused[token] = struct{}{}
}

// refusal is the error of a refused token. The caller holds g.mu.
func (g *Gate) refusal(token coordination.FencingToken) error {
	if !g.refreshed || !g.held {
		return &FencedTokenError{Role: g.role, Token: token, Current: coordination.NoEpoch}
	}
	return &FencedTokenError{Role: g.role, Token: token, Current: g.current, Held: true}
}

// FencedTokenError reports a token that a [Gate] refused: the transaction
// coordinator holds another token for the role, or none. It wraps
// [coordination.ErrFenced]. Find it with [errors.As].
type FencedTokenError struct {
	// Role is the role of the gate.
	Role coordination.Role

	// Token is the refused token.
	Token coordination.FencingToken

	// Current is the coordinator's token as the gate last saw it, and
	// Held reports whether a member held the role then; Current is
	// [coordination.NoEpoch] when Held is false.
	Current coordination.FencingToken
	Held    bool
}

// Error writes "device: role <role>: token <token> is not the
// coordinator's token <current>: fenced: another member holds the role".
func (e *FencedTokenError) Error() string {
	current := "none (no member took the role)"
	if e.Held {
		current = e.Current.String()
	}
	return fmt.Sprintf("device: role %s: token %s is not the coordinator's token %s: %s", e.Role, e.Token, current, coordination.ErrFenced)
}

// Unwrap returns [coordination.ErrFenced].
func (e *FencedTokenError) Unwrap() error { return coordination.ErrFenced }

// errorOnly wraps an error for errors.Is and errors.As, and says nothing:
// the message that wraps it has said its words already, without the
// "coordination: " prefix.
type errorOnly struct{ err error }

func (e errorOnly) Error() string { return "" }
func (e errorOnly) Unwrap() error { return e.err }
