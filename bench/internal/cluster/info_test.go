package cluster

import "testing"

func TestParseInfo(t *testing.T) {
	text := "# Replication\r\nrole:master\r\nconnected_slaves:2\r\nslave0:ip=127.0.0.1,port=1,state=online\r\n\r\n# Stats\r\ntotal_forks:3\r\n"
	f := ParseInfo(text)
	want := map[string]string{
		"role": "master", "connected_slaves": "2", "total_forks": "3",
		"slave0": "ip=127.0.0.1,port=1,state=online",
	}
	if len(f) != len(want) {
		t.Fatalf("ParseInfo = %v", f)
	}
	for k, v := range want {
		if f[k] != v {
			t.Errorf("%s = %q, want %q", k, f[k], v)
		}
	}
}
