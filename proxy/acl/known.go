package acl

// Lookup finds the command args name in Redis 7.0's table, as Redis's
// processCommand does before anything else: the command, and for a
// container with more than one argument the subcommand args[1] names. It
// returns the full name ("client|kill") and Redis's arity, so that a
// server answers an unknown name and a wrong argument count as Redis does,
// before the ACL is asked. A name Redis does not have is not found: a
// server must then answer it itself, and never run it unchecked (a
// subcommand it serves beyond Redis 7.0, CLIENT SETINFO from 7.2, is
// judged by ContainerAllowed).
func Lookup(args [][]byte) (name string, arity int, ok bool) {
	id, ok := table.lookupArgs(args)
	if !ok {
		return "", 0, false
	}
	return table.cmds[id].name, table.cmds[id].arity, true
}

// ContainerAllowed reports whether p allows every subcommand of cmd, a
// container: what a subcommand Redis 7.0 does not have (one the proxy
// answers as a later Redis does) is allowed under.
func (p *Profile) ContainerAllowed(cmd string) bool {
	id, ok := table.lookupTop(cmd)
	if !ok {
		return false
	}
	c := &table.cmds[id]
	for i := range p.selectors {
		if !p.selectors[i].allowsCommand(c, "", false) {
			continue
		}
		all := true
		for _, sub := range c.subs {
			if !p.selectors[i].allowsCommand(&table.cmds[sub], "", false) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}
