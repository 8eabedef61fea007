// Command krabka-coord shows package coordination at work, and it is the
// operator's tool for the leader elections that the package runs on Kafka.
//
// Usage:
//
//	krabka-coord demo                          election, failover and fencing on an embedded cluster
//	krabka-coord create-topic                  create or check the state topic
//	krabka-coord doctor [ROLE...]              preflight check: versions, lease, topic, ACLs
//	krabka-coord list                          every role: holder, token, lease, standbys
//	krabka-coord describe ROLE... | --all      roster, lease and epoch of roles
//	krabka-coord watch ROLE... | --all         follow roles and print each change
//	krabka-coord elect ROLE MEMBER             take the role and hold it until a signal or a fence
//	krabka-coord run ROLE MEMBER -- CMD ARGS   run a command only while this member leads
//	krabka-coord step-down ROLE --at ADDR      drain: the holder resigns and stays a standby
//	krabka-coord transfer ROLE --to M --at ADDR   hand the role to a named member of its roster
//	krabka-coord drain MEMBER --at ADDR...     empty a member: its roles to live standbys, its registrations withdrawn
//	krabka-coord fence ROLE                    forced failover: mint a new epoch for the role
//
// Every command but demo needs --brokers (or KRABKA_BROKERS). Run
// `krabka-coord COMMAND --help` for the flags and examples of a command,
// and `krabka-coord --version` for the build. --output json writes the
// objects of json.md, one per line.
//
// Exit codes, for scripts:
//
//	0  success; elect or run resigned on SIGINT, SIGTERM or SIGHUP, or a
//	   command was interrupted so before it changed anything
//	1  failure: a check of demo failed, an elect --wait ran out, another error
//	2  usage: unknown flag or command, wrong arguments, invalid role or
//	   member, flags out of bounds, a role never taken (describe, fence), a
//	   live duplicate of MEMBER
//	3  fenced: another member took the role while this one held it, the
//	   producer of its epoch was lost, or run's lease guard stopped its
//	   command
//	4  cluster: the brokers are unreachable, refuse the credentials or an
//	   ACL, or the state topic is missing, has another partition count, or
//	   is not compacted
//
// doctor exits 0 when every check passed, 1 on warnings and 2 on a blocker
// (4 when no broker answers).
//
// run exits with the exit code of its command (128+n when a signal n ended
// it), and with 3 when a fence or the lease guard ended the leadership, 126
// or 127 when the command cannot be run.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Exit codes. See the package documentation.
const (
	exitOK       = 0
	exitFailure  = 1
	exitUsage    = 2
	exitFenced   = 3
	exitCluster  = 4
	exitNoExec   = 126 // run: the command was found but could not be started
	exitNotFound = 127 // run: the command was not found
)

func main() {
	os.Exit(execute(context.Background(), os.Args[1:], os.Stdout, os.Stderr, os.Getenv))
}

// execute runs the command line args and returns the exit code. It prints
// an error as one line on stderr.
func execute(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	return executeWith(ctx, args, stdout, stderr, getenv, nil)
}

// executeWith is execute, with configure applied to the globals before
// the command runs (nil for none): the tests set a dialer with it.
func executeWith(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string, configure func(*globals)) int {
	root, g := newRoot(stdout, stderr, getenv)
	if configure != nil {
		configure(g)
	}
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	var exit *exitError
	if !errors.As(err, &exit) {
		// Every RunE classifies its own errors, so an unclassified one
		// comes from cobra: an unknown command or flag, a wrong argument
		// count.
		exit = &exitError{code: exitUsage, err: cobraError(err, strings.TrimSpace("krabka-coord "+commandPath(root, args)))}
		if flag := unknownLeadingFlag(root, args); flag != "" && strings.HasPrefix(err.Error(), "unknown command") {
			exit.err = fmt.Errorf("unknown flag: %s (see 'krabka-coord --help')", flag)
		}
	}
	if exit.err != nil && !exit.silent {
		fmt.Fprintln(stderr, "krabka-coord: "+oneLine(exit.err.Error()))
	}
	return exit.code
}

// cobraError rewrites an error of cobra as one line: its suggestions
// ("Did you mean this?" and a list) become "(did you mean x?", and the
// help of the command follows.
func cobraError(err error, path string) error {
	text, suggestions, found := strings.Cut(err.Error(), "\n\nDid you mean this?\n")
	if !found {
		return fmt.Errorf("%w (see '%s --help')", err, path)
	}
	var names []string
	for _, line := range strings.Split(suggestions, "\n") {
		if name := strings.TrimSpace(line); name != "" {
			names = append(names, name)
		}
	}
	return fmt.Errorf("%s (did you mean %s?; see '%s --help')", strings.TrimSpace(text), strings.Join(names, " or "), path)
}

// unknownLeadingFlag returns the first flag of args before the command's
// name that the root command does not define, or "". Cobra takes such a
// flag for one with a value when it looks for the command, so in
// "--bogus --brokers 127.0.0.1:1" the address would read as the command.
func unknownLeadingFlag(root *cobra.Command, args []string) string {
	lookup := func(name string, short bool) *pflag.Flag {
		for _, set := range []*pflag.FlagSet{root.PersistentFlags(), root.Flags()} {
			if short {
				if f := set.ShorthandLookup(name); f != nil {
					return f
				}
			} else if f := set.Lookup(name); f != nil {
				return f
			}
		}
		return nil
	}
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if arg == "--" || arg == "-" || !strings.HasPrefix(arg, "-") {
			return "" // the command's name, or the end of the flags
		}
		if !strings.HasPrefix(arg, "--") {
			// Shorthands, one letter each (-v, -vo json, -ojson): a letter
			// of a flag with a value takes the rest, or the next argument.
			letters := arg[1:]
			for j := 0; j < len(letters); j++ {
				name := letters[j : j+1]
				if name == "h" {
					continue
				}
				f := lookup(name, true)
				if f == nil {
					return "-" + name
				}
				if f.NoOptDefVal == "" {
					if j == len(letters)-1 {
						i++ // the value is the next argument
					}
					break
				}
			}
			continue
		}
		name, _, hasValue := strings.Cut(arg[2:], "=")
		if name == "help" || name == "version" {
			continue
		}
		f := lookup(name, false)
		if f == nil {
			return "--" + name
		}
		if !hasValue && f.NoOptDefVal == "" {
			i++ // the flag's value
		}
	}
	return ""
}

// commandPath names the subcommand of args for a usage hint, or "" when
// there is none.
func commandPath(root *cobra.Command, args []string) string {
	cmd, _, err := root.Find(args)
	if err != nil || cmd == nil || !cmd.HasParent() {
		return ""
	}
	return strings.TrimPrefix(cmd.CommandPath(), "krabka-coord ")
}
