package coordination

import (
	"errors"
	"fmt"
	"strings"

	"github.com/krabka-io/krabka-streams-go/coordination/internal/bridge"
	"github.com/krabka-io/krabka-streams-go/coordination/internal/kafkawire"
)

// The device side (coordination/device) renders the errors of its reader
// with kafkaError too.
func init() { bridge.KafkaError = kafkaError }

// This file holds the one place where the Kafka transport turns an error
// of kafkawire into the errors of this package: the class that kafkawire's
// classifier chose becomes a sentinel ([ErrFenced], [ErrProducerLost],
// [ErrNotAuthorized], [ErrMisconfigured], [ErrOutcomeUnknown]) and its
// words, with the "coordination: " prefix once. The broker codes behind a
// class stay in the chain, so errors.Is finds them too.

// errTransportClosed reports a call on a closed KafkaTransport.
var errTransportClosed = errors.New("coordination: the KafkaTransport is closed")

// aclAdvice follows "not authorized" in the message of a missing ACL.
const aclAdvice = ", and no retry helps until an operator grants the ACL " +
	"(a member needs WRITE and DESCRIBE on the TransactionalId of each role, WRITE and READ and DESCRIBE " +
	"on the state topic, and IDEMPOTENT_WRITE on the cluster before Kafka 3.0)"

// kafkaError returns err, an error that kafkawire returned, as an error of
// this package: "coordination: " Op, Detail, the words of the class (none
// for a class that needs no action of the caller), Err, and the words of
// a lost producer when the error ended the epoch, joined by ": ". It wraps
// the class's sentinel, Detail and Err; an Err of kafkawire inside is
// rendered first, the same way. It returns any other error as it is.
func kafkaError(err error) error {
	e, ok := err.(*kafkawire.Error) //nolint:errorlint // kafkawire returns its *Error as it is; a wrapped one was rendered already
	if !ok {
		return err
	}
	if *e == (kafkawire.Error{Class: kafkawire.Closed}) {
		return errTransportClosed
	}
	var nested *kafkawire.Error
	if e.Class == kafkawire.OutcomeUnknown && !e.Ended && e.Detail == nil && !errors.As(e.Err, &nested) {
		// A call that gave up on its transaction in flight (Err is the
		// call's context's); the epoch goes on. An Err that holds an
		// error of kafkawire is a later call's, rendered below.
		return fmt.Errorf("coordination: %s: the call's context ended (%w) with the transaction in flight, which did not end within %v more: %w, "+
			"so the records may be in the log; the transaction ends in the background, within the transaction timeout: "+
			"a batch without an answer goes again until its leader answers, then the transaction is aborted "+
			"unless its commit was on its way; the next write under the token waits for it",
			e.Op, e.Err, kafkawire.AbandonGrace, ErrOutcomeUnknown)
	}
	var parts []string
	var errs []error
	add := func(text string, err error) {
		if text = strings.TrimPrefix(text, "coordination: "); text != "" {
			parts = append(parts, text)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	add(e.Op, nil)
	if e.Detail != nil {
		add(e.Detail.Error(), e.Detail)
	}
	cause := e.Err
	if inner, ok := cause.(*kafkawire.Error); ok { //nolint:errorlint // the direct cause only: a deeper one is inside an error already rendered
		cause = kafkaError(inner)
	}
	said := e.Inherits() // the cause says the class already
	if !said {
		switch e.Class {
		case kafkawire.Fenced:
			add(ErrFenced.Error(), ErrFenced)
		case kafkawire.ProducerLost:
			add(ErrProducerLost.Error(), ErrProducerLost)
		case kafkawire.OutcomeUnknown:
			// A commit whose outcome is unknown, or a request of the epoch
			// that the broker may still apply: the epoch ended (Ended),
			// and the words of a lost producer follow.
			add(ErrOutcomeUnknown.Error(), ErrOutcomeUnknown)
		case kafkawire.Misconfigured:
			add(ErrMisconfigured.Error(), ErrMisconfigured)
		case kafkawire.NotAuthorized:
			add(ErrNotAuthorized.Error()+aclAdvice, ErrNotAuthorized)
		case kafkawire.Closed:
			if cause == nil {
				add(errTransportClosed.Error(), errTransportClosed)
			}
		}
	}
	if cause != nil {
		add(cause.Error(), cause)
	}
	if e.Ended && !said && e.Class != kafkawire.Fenced && e.Class != kafkawire.ProducerLost {
		add(ErrProducerLost.Error(), ErrProducerLost)
	}
	return &contextError{msg: "coordination: " + strings.Join(parts, ": "), errs: errs}
}
