package acl

// Known reports whether args name a command Redis 7.0 has: the command,
// and for a container with more than one argument the subcommand args[1]
// names. Redis answers a name it does not know ("unknown subcommand")
// before the ACL is asked; the server does the same for the subcommands
// it answers beyond Redis 7.0's (CLIENT SETINFO, from Redis 7.2), which it
// judges by the container's rules (ContainerAllowed).
func Known(args [][]byte) bool {
	_, ok := table.lookupArgs(args)
	return ok
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
