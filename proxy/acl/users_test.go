package acl

import (
	"fmt"
	"slices"
	"sync"
	"testing"
)

func TestDelUser(t *testing.T) {
	s := NewUsers()
	a := mustSetUser(t, s, "a", "on", "+get")
	mustSetUser(t, s, "b")
	if _, err := s.DelUser([]string{"a", "default"}); err == nil || err.Error() != "The 'default' user cannot be removed" {
		t.Fatalf("DelUser default: %v", err)
	}
	if a.Deleted() || s.Lookup("a") == nil {
		t.Fatal("a refused DELUSER removed a user")
	}
	deleted, err := s.DelUser([]string{"a", "a", "nosuch"})
	if err != nil || len(deleted) != 1 || deleted[0] != a {
		t.Fatalf("DelUser = %v %v", deleted, err)
	}
	if !a.Deleted() || s.Lookup("a") != nil || a.CanRun("get", "") {
		t.Fatal("a deleted user is still there, or may run commands")
	}
	if _, ok := s.Authenticate("a", nil); ok {
		t.Fatal("a deleted user authenticated")
	}
	// A user created again under the same name is another user.
	if a2 := mustSetUser(t, s, "a", "on"); a2 == a || a2.Deleted() {
		t.Fatal("the new user a is the deleted one")
	}
}

func TestListAndNames(t *testing.T) {
	s := NewUsers()
	for _, name := range []string{"zed", "Alice", "bob", "alice", "b"} {
		mustSetUser(t, s, name, "on")
	}
	if got, want := s.Names(), []string{"Alice", "alice", "b", "bob", "default", "zed"}; !slices.Equal(got, want) {
		t.Fatalf("Names() = %q, want %q", got, want)
	}
	if got := s.List(); len(got) != 6 || got[0] != "user Alice on resetchannels -@all" || got[4] != "user default on nopass ~* &* +@all" {
		t.Fatalf("List() = %q", got)
	}
	if got := plainOf(s.GetUser("nosuch")); got != nil {
		t.Fatalf("GetUser(nosuch) = %v", got)
	}
	want := []any{"flags", []any{"on"}, "passwords", []any{}, "commands", "-@all", "keys", "", "channels", "",
		"selectors", []any{}}
	if got := plainOf(s.GetUser("bob")); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("GetUser(bob) = %v", got)
	}
	v := s.GetUser("bob")
	if v.Kind != KindMap || v.Elems[1].Kind != KindSet {
		t.Fatalf("GetUser kinds: %v %v", v.Kind, v.Elems[1].Kind)
	}
}

// TestConcurrentUse runs the per-command checks of many clients while
// users change, are deleted and reloaded (run it with -race): every check
// sees one whole profile, old or new.
func TestConcurrentUse(t *testing.T) {
	s := NewUsers()
	log := NewLog(DefaultLogMaxLen)
	mustSetUser(t, s, "repl", "on", ">x", "+psync", "+replconf", "+ping")
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				u, ok := s.Authenticate("repl", []byte("x"))
				if !ok {
					continue // between a DELUSER and the next SETUSER, or a LOAD
				}
				p := u.Profile()
				// Whatever version this is, it allows ping and refuses get.
				if p.Check(bs("ping")) != nil || p.Check(bs("get", "k")) == nil {
					t.Error("a profile half changed")
					return
				}
				log.Add(Event{Reason: ReasonCommand, Object: "get", Username: u.Name()}, testNow)
				_ = s.List()
			}
		}()
	}
	for i := 0; i < 200; i++ {
		switch i % 4 {
		case 0:
			mustSetUser(t, s, "repl", "+info", "-info", fmt.Sprintf("~k%d", i))
		case 1:
			s.DelUser([]string{"repl"})
		case 2:
			mustSetUser(t, s, "repl", "on", ">x", "+psync", "+replconf", "+ping")
		case 3:
			if err := s.Load("users.acl", []byte("user repl on >x +ping +psync\n")); err != nil {
				t.Fatal(err)
			}
		}
		log.Command(bs("5"), testNow)
	}
	close(stop)
	wg.Wait()
}
