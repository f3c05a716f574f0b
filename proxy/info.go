package proxy

import (
	"strings"

	"github.com/replproxy/replproxy/proxy/report"
)

func (s *Server) cmdInfo(c *client, args [][]byte) bool {
	names := make([]string, 0, len(args)-1)
	for _, a := range args[1:] {
		names = append(names, string(a))
	}
	c.out = c.proto().AppendVerbatim(c.out, "txt", s.Info(names...)) // a bulk string in RESP2
	return false
}

// Info returns the text of INFO for the named sections: none, "default",
// "all" or "everything" mean every section. Package report writes them.
func (s *Server) Info(sections ...string) string {
	want := map[string]bool{}
	for _, sec := range sections {
		want[strings.ToLower(sec)] = true
	}
	all := len(want) == 0 || want["default"] || want["all"] || want["everything"]
	// One report for every section asked for, so that the sections agree
	// with each other as /metrics does with them; the costly parts only for
	// the sections that show them.
	var parts reportParts
	if all || want["memory"] {
		parts |= reportMemory
	}
	if all || want["persistence"] {
		parts |= reportDisk
	}
	r := s.report(parts)
	var b strings.Builder
	for _, sec := range report.InfoSections {
		if !all && !want[sec] {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\r\n")
		}
		r.WriteInfoSection(&b, sec)
	}
	return b.String()
}
