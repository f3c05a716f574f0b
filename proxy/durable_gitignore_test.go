package proxy

import (
	"os"
	"strings"
	"testing"

	"github.com/replproxy/replproxy/proxy/snapfile"
)

// TestGitignoreNamesDirFiles: the files the default dir (.) gets, run from
// a checkout, are in the repository's .gitignore.
func TestGitignoreNamesDirFiles(t *testing.T) {
	b, err := os.ReadFile("../.gitignore")
	if err != nil {
		t.Fatal(err)
	}
	lines := map[string]bool{}
	for _, l := range strings.Split(string(b), "\n") {
		lines[strings.TrimSpace(l)] = true
	}
	for _, want := range []string{
		"/" + lockFileName,
		"/" + snapfile.FileName,
		"/" + snapfile.MetaName,
		"/replproxy-snapshot-*.tmp", // snapfile's temporary files
		"/" + logDirName + "/",
	} {
		if !lines[want] {
			t.Errorf(".gitignore lacks %q", want)
		}
	}
}
