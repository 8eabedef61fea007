package kafkawire

// This file holds the error that the package returns: an [*Error] names
// the call, carries the [Class] that Classify chose (classify.go) and the
// cause, and wraps both for errors.Is and errors.As. wrap and within build
// one; ClassOf reads its class back.

// Error is an error of the package: what was asked (Op), what went wrong
// (Detail, Err), and what it means (Class). errors.Is and errors.As see
// Detail and Err, and through them every broker code (a kerr value) and
// context error.
//
// The coordination package renders it for its callers: "coordination: "
// Op, Detail, the words and the sentinel of the Class, Err, each after
// ": ", and after them the words of a lost producer when Ended is set and
// the Class does not say so already.
type Error struct {
	// Op names the call, and how far it got, such as "lease write of role
	// controller to __coordination_state-3 under 4242:7, nothing committed".
	// The caller of the package chooses the words of the calls that it
	// names; the package's own are such as "read t-0: fetch".
	Op string
	// Class is what the error means.
	Class Class
	// Detail says what happened, before the class, in words; nil for none.
	// It may wrap a cause.
	Detail error
	// Err is the cause, after the class; nil for none. An *Error here of
	// the same Class and without a Detail is the same error, seen from a
	// later call.
	Err error
	// Ended reports that the epoch's producer ended with this error: no
	// write under its pair is sent again.
	Ended bool
}

// Error writes Op, Detail, Class, Err and "producer lost" for Ended,
// joined by ": ", leaving out what is empty and the class Retriable.
func (e *Error) Error() string {
	s := e.Op
	add := func(part string) {
		if part == "" {
			return
		}
		if s != "" {
			s += ": "
		}
		s += part
	}
	if e.Detail != nil {
		add(e.Detail.Error())
	}
	if e.Class != Retriable && !e.Inherits() {
		add(e.Class.String())
	}
	if e.Err != nil {
		add(e.Err.Error())
	}
	if e.Ended && e.Class != Fenced && e.Class != ProducerLost {
		add(ProducerLost.String())
	}
	return s
}

// Unwrap returns Detail and Err, those that are set.
func (e *Error) Unwrap() []error {
	var errs []error
	for _, err := range []error{e.Detail, e.Err} {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// Inherits reports an error that only names a later call of an earlier
// error: Err is an *Error of the same Class, and there is no Detail. Its
// class is already said by Err.
func (e *Error) Inherits() bool {
	inner, ok := e.Err.(*Error) //nolint:errorlint // the direct cause only, by definition
	return ok && inner.Class == e.Class && e.Detail == nil
}

// ClassOf returns the Class of err when it is an *Error, and Retriable for
// any other error. It does not look inside wrappers: the package returns
// its errors as they are.
func ClassOf(err error) Class {
	if e, ok := err.(*Error); ok { //nolint:errorlint // not inside wrappers, as documented
		return e.Class
	}
	return Retriable
}

// wrap returns err, which a request of path returned, as an *Error of op,
// classified.
func wrap(path Path, op string, err error) *Error {
	return &Error{Op: op, Class: Classify(path, err), Err: err}
}

// within returns an *Error of op for err: err under the name of a later
// call when it is an *Error of the package, and err classified on path
// otherwise.
func within(path Path, op string, err error) *Error {
	if e, ok := err.(*Error); ok { //nolint:errorlint // an *Error of the package as it returned it
		return &Error{Op: op, Class: e.Class, Err: e}
	}
	return wrap(path, op, err)
}

// errClosed is the error of a call on a closed [Wire].
var errClosed = &Error{Class: Closed}
