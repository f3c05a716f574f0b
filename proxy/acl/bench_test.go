package acl

import "testing"

// BenchmarkDescribe measures the description of a user with a typical
// mix of rules (ACL LIST's cost, paid once per change).
func BenchmarkDescribe(b *testing.B) {
	s := NewUsers()
	u := mustSetUser(b, s, "u", "on", "+@all", "-@dangerous", "+config|get", "-get", "~k*", "(+get ~x)")
	p := u.Profile()
	b.ReportAllocs()
	for b.Loop() {
		p.describe()
	}
}

// BenchmarkCheck measures the per-command check of a replication user.
func BenchmarkCheck(b *testing.B) {
	s := NewUsers()
	u := mustSetUser(b, s, "u", "on", ">x", "+psync", "+replconf", "+ping")
	args := bs("replconf", "ack", "12345")
	b.ReportAllocs()
	for b.Loop() {
		if u.Profile().Check(args) != nil {
			b.Fatal("refused")
		}
	}
}

// BenchmarkCanRun measures CanRun for a command with a subcommand.
func BenchmarkCanRun(b *testing.B) {
	s := NewUsers()
	u := mustSetUser(b, s, "u", "on", "+client|setname", "+ping")
	b.ReportAllocs()
	for b.Loop() {
		if !u.CanRun("client", "setname") {
			b.Fatal("refused")
		}
	}
}
