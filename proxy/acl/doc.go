// Package acl is Redis 7.0's ACL users, as redis-server 7.0.15 has them,
// for the proxy: the rules of ACL SETUSER, the permission checks of every
// command, the replies of the ACL subcommands, the aclfile, the "user"
// lines of the configuration file, and the ACL LOG. It does no I/O and
// knows nothing of the server: it takes arguments and returns verdicts and
// replies as plain values ([Value]), which the server writes in RESP2 or
// RESP3.
//
// # What it owns
//
//   - The command table ACL rules name (redis_commands.txt, embedded):
//     every command and subcommand of Redis 7.0 with its arity, flags, ACL
//     categories and key specs, generated from a real redis-server by
//     TestCommandTableMatchesRedis -update-acl-commands. Rules name Redis's
//     commands whether the proxy serves them or not (Sentinel's documented
//     user allows +multi +exec +script|kill), and ACL DRYRUN judges any of
//     them as Redis does, keys included.
//   - [Users]: the users by name, the default user, acl-pubsub-default and
//     requirepass ([Users.SetDefaultPassword]); ACL SETUSER, DELUSER,
//     GETUSER, LIST, USERS, DRYRUN, LOAD ([Users.Load]) and SAVE
//     ([Users.Save]); authentication ([Users.Authenticate]).
//   - [User] and [Profile]: a user's identity, and one immutable version of
//     its flags, password hashes and selectors, with the checks:
//     [Profile.Check] (a command with its keys and channels),
//     [Profile.CanRun], [Profile.CanSubscribe], [Profile.CanPSubscribe].
//   - [Log]: the ACL LOG, and [Cat], [GenPass], [Help], [Subcommand].
//
// The server keeps what needs a connection or a file: ACL WHOAMI (the
// client's user), reading and writing the aclfile, the ACL LOG's client
// info, and disconnecting clients (see below).
//
// # Rules, exactly as Redis
//
// Every rule (on, off, >pass, <pass, #hash, !hash, nopass, resetpass,
// reset, +cmd, -cmd, +cmd|sub, -cmd|sub, +cmd|firstarg, +@cat, -@cat,
// allcommands, nocommands, ~pattern, %R~ %W~ %RW~, allkeys, resetkeys,
// &pattern, allchannels, resetchannels, sanitize-payload,
// skip-sanitize-payload, (selector), clearselectors) is applied as Redis
// 7.0 applies it, with its error texts, and a SETUSER with a bad rule
// changes nothing. Descriptions (ACL LIST, GETUSER's commands) are built as
// Redis builds them, from the user's command bits: +@all or -@all, then the
// categories Redis's greedy choice picks, then single commands. Where
// Redis's result depends on a hash seed (the order of single-command rules
// in a description, the order of ACL CAT <category>), this package uses
// the table's order; the rules are the same, and describe the same
// permissions. The few other departures, all where Redis crashes or reads
// freed memory, are stated where they happen (an unmatched parenthesis in
// an aclfile line that has rules before it).
//
// redis-server 7.0.15 as Debian ships it, the reference, carries the fixes
// of CVE-2024-31227 and CVE-2024-51741 (a %-rule must name R or W) and
// CVE-2024-31228 (glob patterns give up past a nesting depth of 1000): so
// does this package.
//
// # Concurrency
//
// [Users] and [Log] are safe for concurrent use. A [Profile] never changes
// once published: a change builds a new Profile and swaps it into the
// [User] atomically. So the check a client makes on every command is one
// atomic load and reads of immutable data, with no lock; [Users]' lock
// (an RWMutex) guards only the map of names, read by AUTH, HELLO and the
// ACL subcommands, and taken exclusively by changes. Nothing in this
// package calls back into the server, no lock is held across anything but
// this package's own memory, and no method holds two locks (a Users and a
// Log are independent). The command table is built once at initialisation
// and only read after.
//
// # What the server must do
//
// A client holds the *User it authenticated as. Before each command it
// asks u.Profile().Check(args) (after its own unknown-command and arity
// checks, as Redis orders them), and on a refusal replies
// [Denied.Error] and adds an [Event] to the [Log]. When ACL SETUSER
// changes an existing user and [ChannelsRevoked] says so, it disconnects
// the user's subscribers whose channels or patterns the new profile
// refuses. After ACL DELUSER and ACL LOAD it disconnects the clients whose
// user is [User.Deleted] (ACL LOAD retires every user but default, as
// Redis frees and recreates them).
//
// Example:
//
//	users := acl.NewUsers()
//	users.SetDefaultPassword(requirepass)
//	if _, _, err := users.SetUser("replica", [][]byte{[]byte("on"), []byte(">s3cret"),
//		[]byte("+psync"), []byte("+replconf"), []byte("+ping")}); err != nil {
//		return err // err.(*acl.Error).Reply() is Redis's error reply
//	}
//	u, ok := users.Authenticate("replica", []byte("s3cret"))
//	if ok && u.Profile().Check(args) == nil {
//		// run args
//	}
package acl
