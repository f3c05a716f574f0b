package redistest

import (
	"errors"
	"slices"
	"testing"
)

func TestFindBinaries(t *testing.T) {
	installed := func(names ...string) func(string) (string, error) {
		return func(name string) (string, error) {
			if slices.Contains(names, name) {
				return "/usr/bin/" + name, nil
			}
			return "", errors.New("executable file not found in $PATH")
		}
	}
	env := func(ci, skip string) func(string) string {
		return func(key string) string {
			switch key {
			case "CI":
				return ci
			case SkipEnv:
				return skip
			}
			return ""
		}
	}
	tests := []struct {
		name     string
		short    bool
		ci       string
		skip     string
		lookPath func(string) (string, error)
		want     binaryDecision
	}{
		{
			name:     "all present outside CI",
			lookPath: installed("redis-server", "redis-cli"),
			want:     binaryDecision{paths: []string{"/usr/bin/redis-server", "/usr/bin/redis-cli"}},
		},
		{
			name:     "all present in CI",
			ci:       "true",
			lookPath: installed("redis-server", "redis-cli"),
			want:     binaryDecision{paths: []string{"/usr/bin/redis-server", "/usr/bin/redis-cli"}},
		},
		{
			name:     "server missing outside CI skips",
			lookPath: installed("redis-cli"),
			want:     binaryDecision{paths: []string{"", "/usr/bin/redis-cli"}, missing: []string{"redis-server"}},
		},
		{
			name:     "server missing with CI=true fails",
			ci:       "true",
			lookPath: installed("redis-cli"),
			want:     binaryDecision{paths: []string{"", "/usr/bin/redis-cli"}, missing: []string{"redis-server"}, mustFail: true},
		},
		{
			name:     "both missing with CI=1 fails",
			ci:       "1",
			lookPath: installed(),
			want:     binaryDecision{paths: []string{"", ""}, missing: []string{"redis-server", "redis-cli"}, mustFail: true},
		},
		{
			name:     "cli missing with CI=false skips",
			ci:       "false",
			lookPath: installed("redis-server"),
			want:     binaryDecision{paths: []string{"/usr/bin/redis-server", ""}, missing: []string{"redis-cli"}},
		},
		{
			name:     "unparsable CI skips",
			ci:       "yes please",
			lookPath: installed(),
			want:     binaryDecision{paths: []string{"", ""}, missing: []string{"redis-server", "redis-cli"}},
		},
		{
			name:     "-short skips although all are present",
			short:    true,
			lookPath: installed("redis-server", "redis-cli"),
			want:     binaryDecision{paths: []string{"", ""}, skipAll: "-short"},
		},
		{
			name:     "-short skips also with CI=true",
			short:    true,
			ci:       "true",
			lookPath: installed(),
			want:     binaryDecision{paths: []string{"", ""}, skipAll: "-short"},
		},
		{
			name:     "REDISTEST=skip skips although all are present",
			skip:     "skip",
			lookPath: installed("redis-server", "redis-cli"),
			want:     binaryDecision{paths: []string{"", ""}, skipAll: "REDISTEST=skip"},
		},
		{
			name:     "REDISTEST=skip skips also with CI=true",
			ci:       "true",
			skip:     "skip",
			lookPath: installed(),
			want:     binaryDecision{paths: []string{"", ""}, skipAll: "REDISTEST=skip"},
		},
		{
			name:     "REDISTEST with another value changes nothing",
			ci:       "true",
			skip:     "1",
			lookPath: installed(),
			want:     binaryDecision{paths: []string{"", ""}, missing: []string{"redis-server", "redis-cli"}, mustFail: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := findBinaries(tt.short, env(tt.ci, tt.skip), tt.lookPath, "redis-server", "redis-cli")
			if got.String() != tt.want.String() {
				t.Errorf("findBinaries:\n got %v\nwant %v", got, tt.want)
			}
		})
	}
}

// TestRequireMissing checks the skip/fail decision end to end through requireBinaries,
// with a program name that cannot exist: under -short it skips before looking, also
// with CI=true.
func TestRequireMissing(t *testing.T) {
	for _, ci := range []string{"", "true"} {
		t.Run("CI="+ci, func(t *testing.T) {
			t.Setenv("CI", ci)
			t.Setenv(SkipEnv, "") // as under `make test`, whatever the caller's environment
			f := newFakeTB(t)
			f.run(func(tb testing.TB) { requireBinaries(tb, "redistest-no-such-program") })
			if ci == "true" && !testing.Short() {
				if !f.Failed() || f.skipped {
					t.Errorf("CI=true: failed=%v skipped=%v, want a failure; log:\n%s", f.Failed(), f.skipped, f.output())
				}
			} else if f.Failed() || !f.skipped {
				t.Errorf("outside CI: failed=%v skipped=%v, want a skip; log:\n%s", f.Failed(), f.skipped, f.output())
			}
		})
	}
}
