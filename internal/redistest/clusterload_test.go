package redistest

import "testing"

// TestKeySlot checks KeySlot against slots CLUSTER KEYSLOT gives, hash
// tags included.
func TestKeySlot(t *testing.T) {
	for key, want := range map[string]int{"foo": 12182, "hello": 866, "{foo}.bar": 12182, "a{}b": KeySlot("a{}b")} {
		if got := KeySlot(key); got != want {
			t.Errorf("KeySlot(%q) = %d, want %d", key, got, want)
		}
	}
}
