package main

// The errors of the CLI: each carries the exit code that it ends the
// process with (main.go lists them), and execute prints its text as one
// line.

import (
	"errors"
	"fmt"
)

// exitError is an error with the exit code that it ends the process with.
type exitError struct {
	code int
	err  error

	// silent: the command printed what it had to say already.
	silent bool
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// usageError is an error of the command line: exit code 2.
func usageError(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

// clusterError is an error of the cluster or of its state topic: exit code 4.
func clusterError(format string, args ...any) error {
	return &exitError{code: exitCluster, err: fmt.Errorf(format, args...)}
}

// fencedError reports a leadership that a fence ended: exit code 3.
func fencedError(format string, args ...any) error {
	return &exitError{code: exitFenced, err: fmt.Errorf(format, args...)}
}

// failure is any other error: exit code 1.
func failure(format string, args ...any) error {
	return &exitError{code: exitFailure, err: fmt.Errorf(format, args...)}
}

// exitCode returns a bare exit code, with nothing to print.
func exitCode(code int) error {
	if code == exitOK {
		return nil
	}
	return &exitError{code: code, silent: true}
}

// classified returns err unchanged when it carries an exit code, and as a
// failure (exit code 1) otherwise.
func classified(err error) error {
	if err == nil {
		return nil
	}
	var exit *exitError
	if errors.As(err, &exit) {
		return err
	}
	return &exitError{code: exitFailure, err: err}
}
