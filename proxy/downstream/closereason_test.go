package downstream

import "testing"

// TestCloseReasonNames: every reason has its own name, fit for an INFO key,
// and applies to replicas, to clients, or to both.
func TestCloseReasonNames(t *testing.T) {
	seen := map[string]CloseReason{}
	for r := CloseNone; r < NumCloseReasons; r++ {
		name := r.String()
		if name == "unknown" || !validIP(name) {
			t.Errorf("reason %d is named %q", r, name)
		}
		if o, dup := seen[name]; dup {
			t.Errorf("reasons %d and %d are both %q", o, r, name)
		}
		seen[name] = r
		if r != CloseNone && !r.AppliesToReplicas() && !r.AppliesToClients() {
			t.Errorf("%s applies to nothing", r)
		}
	}
	if CloseNone.AppliesToClients() || CloseNone.AppliesToReplicas() || NumCloseReasons.String() != "unknown" {
		t.Error("CloseNone or NumCloseReasons is listed")
	}
}
