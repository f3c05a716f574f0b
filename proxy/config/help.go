package config

import (
	"fmt"
	"io"
	"strings"
)

// WriteDirectives writes every directive with its default, one line per
// directive (client-output-buffer-limit: per class), as redis.conf lines
// in the form CONFIG REWRITE writes them, for --help. It is made from the
// directive table, so that it lists every directive there is. A directive
// with no value by default shows "(none)"; those CONFIG SET cannot change
// are marked "startup only".
func WriteDirectives(w io.Writer) error {
	def := DefaultConfig()
	width := 0
	type row struct{ text, note string }
	var rows []row
	for _, name := range Names() {
		note := ""
		if !Mutable(name) {
			note = "startup only"
		}
		lines := directiveLines(def, def, name)
		if len(lines) == 0 {
			// Absent by default: replicaof, passwords, bind at its default.
			v, _ := def.Get(name)
			text := name + " (none)"
			if v != "" {
				text = name + " " + v
			}
			lines = []rewriteLine{{text: text}}
		}
		for _, l := range lines {
			rows = append(rows, row{l.text, note})
			width = max(width, len(l.text))
		}
	}
	for _, r := range rows {
		line := "  " + r.text
		if r.note != "" {
			line += strings.Repeat(" ", width-len(r.text)) + "  (" + r.note + ")"
		}
		if _, err := fmt.Fprintln(w, line); err != nil {
			return err
		}
	}
	return nil
}
