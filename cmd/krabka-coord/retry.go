package main

// The retry of a request that a passing fault failed (a dead seed broker,
// a transaction coordinator that moved with its broker, a broken
// connection), and the errors that no retry changes.

import (
	"context"
	"errors"
	"time"

	"github.com/krabka-io/krabka-streams-go/coordination"
	"github.com/krabka-io/krabka-streams-go/internal/backoff"
)

// permanentError marks an error that retryTransient does not retry.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }

func (e *permanentError) Unwrap() error { return e.err }

// permanent marks err as one that no retry changes.
func permanent(err error) error { return &permanentError{err: err} }

// retryAttempt bounds one attempt of retryTransient, so that one request
// that hangs on a dead broker does not take the whole budget of the
// command.
const retryAttempt = 5 * time.Second

// retryTransient calls op until it succeeds, returns an error that no
// retry changes (an ACL refusal, a misconfiguration, a record that does not
// decode, an error marked permanent), or ctx ends. It retries everything
// else, with a backoff from 100 ms to 1 s: a seed broker that died, a
// transaction coordinator that moved with its broker (Kafka notices a dead
// broker within about ten seconds and moves its partitions), a connection
// that broke. It returns op's last error, unwrapped from permanent.
func retryTransient(ctx context.Context, op func(context.Context) error) error {
	pauses := backoff.Doubling{First: 100 * time.Millisecond, Max: time.Second}
	for {
		attempt, cancel := context.WithTimeout(ctx, retryAttempt)
		err := op(attempt)
		cancel()
		var p *permanentError
		var format *coordination.FormatError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &p):
			return p.err
		case isDenied(err), errors.Is(err, coordination.ErrMisconfigured), errors.As(err, &format):
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(pauses.Next()):
		}
	}
}
