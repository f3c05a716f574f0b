package acl

// Error is an error of this package that Redis reports to the client: Msg
// is Redis's text, word for word, and [Error.Reply] the error reply that
// carries it. Where Redis logs the text instead (the configuration's user
// lines, an aclfile at startup) the server uses Msg alone.
type Error struct {
	Msg string
}

// Error returns e.Msg.
func (e *Error) Error() string { return e.Msg }

// Reply returns the error reply's text, code included: "ERR " + Msg. Every
// error of Redis's ACL subcommands has the code ERR.
func (e *Error) Reply() string { return "ERR " + e.Msg }

func newError(msg string) *Error { return &Error{Msg: msg} }

// ruleErr is why a rule was refused, as Redis's errno after ACLSetUser.
type ruleErr uint8

const (
	errNone             ruleErr = iota
	errSyntax                   // EINVAL: not a rule, or a bad pattern
	errUnknown                  // ENOENT: no such command or category
	errKeysAfterAll             // EEXIST: ~pattern after allkeys
	errChannelsAfterAll         // EISDIR: &pattern after allchannels
	errNoPassword               // ENODEV: <pass or !hash the user does not have
	errBadHash                  // EBADMSG: #hash or !hash not 64 lowercase hex digits
	errDuplicateUser            // EALREADY: a user twice in the configuration file
	errSubFirstArg              // ECHILD: +cmd|sub|arg
)

// text is Redis's description of the error (ACLSetUserStringError).
func (e ruleErr) text() string {
	switch e {
	case errSyntax:
		return "Syntax error"
	case errUnknown:
		return "Unknown command or category name in ACL"
	case errKeysAfterAll:
		return "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns"
	case errChannelsAfterAll:
		return "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels"
	case errNoPassword:
		return "The password you are trying to remove from the user does not exist"
	case errBadHash:
		return "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters"
	case errDuplicateUser:
		return "Duplicate user found. A user can only be defined once in config files"
	case errSubFirstArg:
		return "Allowing first-arg of a subcommand is not supported"
	}
	return "Wrong format"
}

// Texts of Redis's replies and logs that the server may need as they are.
const (
	// ErrConfigAndFile is Redis's log line when both the configuration file
	// declares users and an aclfile is set: Redis refuses to start.
	ErrConfigAndFile = "Configuring Redis with users defined in redis.conf and at the same setting an ACL file path is invalid. This setup is very likely to lead to configuration errors and security holes, please define either an ACL file or declare users directly in your redis.conf, but not both."
	// ErrNoACLFile is ACL LOAD's and ACL SAVE's error (after "ERR ") when
	// no aclfile is configured.
	ErrNoACLFile = "This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration."
	// ErrSaveFailed is ACL SAVE's error (after "ERR ") when the file could
	// not be written.
	ErrSaveFailed = "There was an error trying to save the ACLs. Please check the server logs for more information"
)
