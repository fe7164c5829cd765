package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// guide makes every command's argument errors helpful: a missing or extra
// argument is a usageError that shows the usage line and the command's
// example, and an unknown subcommand of any command (cobra suggests only
// for the root) names the close ones.
func guide(cmd *cobra.Command) {
	for _, sub := range cmd.Commands() {
		guide(sub)
	}
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2
	}
	orig := cmd.Args
	if orig == nil && (!cmd.HasSubCommands() || (cmd.HasParent() && cmd.Runnable())) {
		return // cobra takes any arguments here
	}
	if !cmd.Runnable() {
		// cobra checks the arguments of runnable commands only; one that
		// only groups others shows its help, as before.
		cmd.RunE = func(c *cobra.Command, args []string) error { return c.Help() }
	}
	cmd.Args = func(c *cobra.Command, args []string) error {
		var err error
		if orig != nil {
			err = orig(c, args)
		}
		switch {
		case c.HasAvailableSubCommands() && len(args) > 0 && (orig == nil || err != nil):
			return unknownCommand(c, args[0])
		case err != nil:
			return &usageError{cmd: c, err: err, args: args}
		}
		return nil
	}
}

// subcommandPath is c's path without the root's name ("tasks show"):
// errors are printed after "errand: " already.
func subcommandPath(c *cobra.Command) string {
	if !c.HasParent() {
		return c.Name()
	}
	return strings.TrimPrefix(c.CommandPath(), c.Root().Name()+" ")
}

// unknownCommand names a subcommand c does not have, and the close ones.
func unknownCommand(c *cobra.Command, name string) error {
	msg := fmt.Sprintf("unknown command %q for %q", name, c.CommandPath())
	if s := c.SuggestionsFor(name); len(s) > 0 {
		msg += "; did you mean " + orList(s) + "?"
	}
	return errors.New(msg + "\nRun '" + c.CommandPath() + " --help' for its commands.")
}

// orList joins names as "a", "a or b", "a, b or c".
func orList(names []string) string {
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// usageError is a command given the wrong arguments. Its message is
// several lines: what is wrong, the usage line and the example.
type usageError struct {
	cmd  *cobra.Command
	err  error
	args []string // the arguments given
}

func (e *usageError) Error() string {
	var what string
	switch {
	case len(e.args) == 0:
		what = "missing arguments"
	case strings.HasPrefix(e.err.Error(), "unknown command "): // cobra.NoArgs
		what = fmt.Sprintf("takes no arguments, not %q", e.args[0])
	default:
		what = fmt.Sprintf("wrong arguments (%v)", e.err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s\nUsage: %s\n", subcommandPath(e.cmd), what, e.cmd.UseLine())
	if ex := strings.TrimRight(e.cmd.Example, "\n"); ex != "" {
		b.WriteString("Example:\n" + ex + "\n")
	}
	fmt.Fprintf(&b, "Run '%s --help' for more.", e.cmd.CommandPath())
	return b.String()
}

func (e *usageError) Unwrap() error { return e.err }

// oneErrandPrefix drops the "errand: " prefixes that errors of the
// library and the store carry (their sentinels' package prefix), so that
// a printed error has only the one it is printed with:
// "submit: errand: invalid agent" reads "submit: invalid agent".
func oneErrandPrefix(msg string) string {
	for {
		rest, ok := strings.CutPrefix(msg, "errand: ")
		if !ok {
			break
		}
		msg = rest
	}
	for strings.Contains(msg, ": errand: ") {
		msg = strings.ReplaceAll(msg, ": errand: ", ": ")
	}
	return msg
}
