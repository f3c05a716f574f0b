package acl

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/replproxy/replproxy/proxy/wire"
)

// Subcommand checks the ACL command args (args[0] is "ACL", args[1] the
// subcommand) as Redis 7.0 does before running it, and returns the
// subcommand's name in lower case: setuser, deluser, getuser, list, users,
// whoami, load, save, cat, genpass, log, dryrun or help. Its error is
// Redis's: an unknown subcommand or a wrong argument count (checked against
// the subcommand's arity first, as for any command, then as ACL itself
// checks), or, when hasACLFile is false, the no-aclfile error for LOAD and
// SAVE.
func Subcommand(args [][]byte, hasACLFile bool) (string, *Error) {
	acl, _ := table.lookupTop("acl")
	if len(args) < 2 {
		return "", newError("wrong number of arguments for 'acl' command")
	}
	id, ok := table.lookupSub(acl, string(args[1]))
	if !ok {
		return "", newError(fmt.Sprintf("unknown subcommand '%s'. Try %s HELP.",
			clip(wire.CString(string(args[1])), 128), wire.Upper(wire.CString(string(args[0])))))
	}
	c := &table.cmds[id]
	if (c.arity > 0 && c.arity != len(args)) || len(args) < -c.arity {
		return "", newError(fmt.Sprintf("wrong number of arguments for '%s' command", c.name))
	}
	_, sub, _ := strings.Cut(c.name, "|")
	argc := len(args)
	switch sub {
	case "load", "save":
		if !hasACLFile {
			return "", newError(ErrNoACLFile)
		}
	case "cat", "genpass", "log":
		if argc > 3 {
			return "", syntaxError(args)
		}
	}
	return sub, nil
}

// syntaxError is Redis's reply to an unknown subcommand or a wrong count of
// arguments.
func syntaxError(args [][]byte) *Error {
	return newError(fmt.Sprintf("unknown subcommand or wrong number of arguments for '%s'. Try %s HELP.",
		clip(wire.CString(string(args[1])), 128), wire.Upper(wire.CString(string(args[0])))))
}

// clip returns s cut to n bytes, as printf's %.<n>s.
func clip(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// helpLines is ACL HELP's text, Redis 7.0's.
var helpLines = []string{
	"ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"CAT [<category>]",
	"    List all commands that belong to <category>, or all command categories",
	"    when no category is specified.",
	"DELUSER <username> [<username> ...]",
	"    Delete a list of users.",
	"DRYRUN <username> <command> [<arg> ...]",
	"    Returns whether the user can execute the given command without executing the command.",
	"GETUSER <username>",
	"    Get the user's details.",
	"GENPASS [<bits>]",
	"    Generate a secure 256-bit user password. The optional `bits` argument can",
	"    be used to specify a different size.",
	"LIST",
	"    Show users details in config file format.",
	"LOAD",
	"    Reload users from the ACL file.",
	"LOG [<count> | RESET]",
	"    Show the ACL log entries.",
	"SAVE",
	"    Save the current config to the ACL file.",
	"SETUSER <username> <attribute> [<attribute> ...]",
	"    Create or modify a user with the specified attributes.",
	"USERS",
	"    List all the registered usernames.",
	"WHOAMI",
	"    Return the current connection username.",
	"HELP",
	"    Prints this help.",
}

// Help is ACL HELP's reply: an array of simple strings.
func Help() Value {
	v := Value{Kind: KindArray, Elems: make([]Value, len(helpLines))}
	for i, l := range helpLines {
		v.Elems[i] = simple(l)
	}
	return v
}

// Cat is ACL CAT [category] (args: what follows CAT): with no argument the
// categories, in Redis's order; with one, the commands and subcommands in
// that category (containers before their subcommands, by name: Redis lists
// the same names in its dictionary's order, which differs per process).
func Cat(args [][]byte) Value {
	if len(args) == 0 {
		return bulks(table.categories)
	}
	name := wire.CString(string(args[0]))
	bit := table.category(name)
	if bit == 0 {
		return errorValue(newError(fmt.Sprintf("Unknown category '%s'", clip(name, 128))))
	}
	var names []string
	table.each(func(c *command) {
		if c.cats&bit != 0 {
			names = append(names, c.name)
		}
	})
	return bulks(names)
}

// genPassMaxBits bounds ACL GENPASS's argument.
const genPassMaxBits = 4096

// GenPass is ACL GENPASS [bits] (args: what follows GENPASS): a random
// password of bits bits (256 when absent, 1 to 4096), in lowercase hex,
// one character per 4 bits rounded up.
func GenPass(args [][]byte) Value {
	bits := int64(256)
	if len(args) > 0 {
		n, ok := parseInt64(string(args[0]))
		if !ok {
			return errorValue(errNotInteger)
		}
		bits = n
	}
	if bits <= 0 || bits > genPassMaxBits {
		return errorValue(newError(fmt.Sprintf("ACL GENPASS argument must be the number of bits for the output password, a positive number up to %d", genPassMaxBits)))
	}
	chars := (bits + 3) / 4
	buf := make([]byte, (chars+1)/2)
	if _, err := rand.Read(buf); err != nil {
		// crypto/rand does not fail on the platforms Go supports.
		panic("acl: crypto/rand: " + err.Error())
	}
	return bulk(hex.EncodeToString(buf)[:chars])
}

// errNotInteger is Redis's reply to an argument that is not an integer.
var errNotInteger = newError("value is not an integer or out of range")

// DryRun is ACL DRYRUN user command [arg...] (args: what follows DRYRUN):
// OK when the user may run the command, else the refusal as a bulk string
// ("This user has no permissions to run the 'get' command"), and an error
// for an unknown user, an unknown command or a wrong argument count. Any
// Redis 7.0 command is judged, as Redis judges it, whether the proxy
// serves it or not.
func (s *Users) DryRun(args [][]byte) Value {
	if len(args) < 2 {
		return errorValue(newError("wrong number of arguments for 'acl|dryrun' command"))
	}
	u := s.Lookup(string(args[0]))
	if u == nil {
		return errorValue(newError(fmt.Sprintf("User '%s' not found", wire.CString(string(args[0])))))
	}
	cmdArgs := args[1:]
	id, ok := table.lookupArgs(cmdArgs)
	if !ok {
		return errorValue(newError(fmt.Sprintf("Command '%s' not found", wire.CString(string(cmdArgs[0])))))
	}
	c := &table.cmds[id]
	if (c.arity > 0 && c.arity != len(cmdArgs)) || len(cmdArgs) < -c.arity {
		return errorValue(newError(fmt.Sprintf("wrong number of arguments for '%s' command", c.name)))
	}
	d := u.Profile().check(c, cmdArgs)
	switch {
	case d == nil:
		return okValue
	case d.Reason == ReasonKey:
		return bulk(fmt.Sprintf("This user has no permissions to access the '%s' key", wire.CString(d.Object)))
	case d.Reason == ReasonChannel:
		return bulk(fmt.Sprintf("This user has no permissions to access the '%s' channel", wire.CString(d.Object)))
	}
	return bulk(fmt.Sprintf("This user has no permissions to run the '%s' command", c.name))
}
