package acl

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/replproxy/replproxy/proxy/wire"
)

// The proxy serves no keys, but ACL DRYRUN judges any Redis command as
// Redis does, and Redis checks the keys a command names against the
// selector's key patterns. So the key positions are found here as Redis 7.0
// finds them: from the command's key specs (COMMAND's index 8, in the
// table), and, where the specs cannot say (incomplete, unknown, variable
// flags, or an argument count they do not fit), by the command's own key
// function, which lives in Redis's code and is rewritten below.

// keyFlag is a key spec's flags (Redis's CMD_KEY_*).
type keyFlag uint16

const (
	keyRO keyFlag = 1 << iota
	keyRW
	keyOW
	keyRM
	keyAccess
	keyUpdate
	keyInsert
	keyDelete
	keyNotKey
	keyIncomplete
	keyVariableFlags
)

// keyFlagNames are the flags as COMMAND names them, in bit order.
var keyFlagNames = [...]string{"RO", "RW", "OW", "RM", "access", "update", "insert", "delete", "not_key", "incomplete", "variable_flags"}

// keySpec is one key spec of a command: where its keys begin, and how to
// find them from there.
type keySpec struct {
	flags keyFlag
	// begin: "index" (pos), "keyword" (keyword searched from startFrom:
	// forwards if positive, backwards from the end if negative), or
	// "unknown".
	begin     string
	pos       int
	keyword   string
	startFrom int
	// find: "range" (lastKey, keyStep, limit), "keynum" (keyNumIdx,
	// firstKey, keyStep), or "unknown".
	find      string
	lastKey   int
	keyStep   int
	limit     int
	keyNumIdx int
	firstKey  int
}

// parseKeySpec parses the table's form of a key spec:
// <flag>,<flag>/index:<pos>|keyword:<word>:<startfrom>|unknown/range:<lastkey>:<step>:<limit>|keynum:<idx>:<first>:<step>|unknown
func parseKeySpec(s string) (keySpec, error) {
	var ks keySpec
	parts := strings.Split(s, "/")
	if len(parts) != 3 {
		return ks, fmt.Errorf("key spec %q: want flags/begin/find", s)
	}
	if parts[0] != "-" {
		for _, f := range strings.Split(parts[0], ",") {
			i := indexOf(keyFlagNames[:], f)
			if i < 0 {
				return ks, fmt.Errorf("key spec %q: unknown flag %q", s, f)
			}
			ks.flags |= 1 << i
		}
	}
	begin := strings.Split(parts[1], ":")
	find := strings.Split(parts[2], ":")
	ks.begin, ks.find = begin[0], find[0]
	var err error
	switch {
	case ks.begin == "index" && len(begin) == 2:
		ks.pos, err = strconv.Atoi(begin[1])
	case ks.begin == "keyword" && len(begin) == 3:
		ks.keyword = begin[1]
		ks.startFrom, err = strconv.Atoi(begin[2])
	case ks.begin == "unknown" && len(begin) == 1:
	default:
		return ks, fmt.Errorf("key spec %q: bad begin_search", s)
	}
	if err != nil {
		return ks, fmt.Errorf("key spec %q: %w", s, err)
	}
	switch {
	case ks.find == "range" && len(find) == 4:
		err = atoiAll(find[1:], &ks.lastKey, &ks.keyStep, &ks.limit)
	case ks.find == "keynum" && len(find) == 4:
		err = atoiAll(find[1:], &ks.keyNumIdx, &ks.firstKey, &ks.keyStep)
	case ks.find == "unknown" && len(find) == 1:
	default:
		return ks, fmt.Errorf("key spec %q: bad find_keys", s)
	}
	if err != nil {
		return ks, fmt.Errorf("key spec %q: %w", s, err)
	}
	return ks, nil
}

// atoiAll parses each of ss into the matching dst.
func atoiAll(ss []string, dst ...*int) error {
	for i, s := range ss {
		n, err := strconv.Atoi(s)
		if err != nil {
			return err
		}
		*dst[i] = n
	}
	return nil
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}

// keyRef is one key of a command: its argument position and access flags.
type keyRef struct {
	pos   int
	flags keyFlag
}

// hasKeys reports whether c may name keys: it has a key function, or a
// key spec that is not only a 'fake' key (Redis's doesCommandHaveKeys).
func (c *command) hasKeys() bool {
	_, ok := keyFuncs[c.name]
	return ok || c.hasRealKeySpec()
}

func (c *command) hasRealKeySpec() bool {
	for _, ks := range c.keySpecs {
		if ks.flags&keyNotKey == 0 {
			return true
		}
	}
	return false
}

// keys returns the keys args names for command c, as Redis 7.0's
// getKeysFromCommandWithSpecs: the specs when they are reliable and fit
// args, else the command's key function, else none.
func (c *command) keys(args [][]byte) []keyRef {
	varFlags := false
	for _, ks := range c.keySpecs {
		varFlags = varFlags || ks.flags&keyVariableFlags != 0
	}
	if c.hasRealKeySpec() && !varFlags {
		if keys, ok := c.keysFromSpecs(args); ok {
			return keys
		}
	}
	if fn, ok := keyFuncs[c.name]; ok {
		return fn(args)
	}
	return nil
}

// keysFromSpecs applies every spec of c to args; ok is false when one of
// them does not fit (Redis's invalid_spec), and then no key is returned.
func (c *command) keysFromSpecs(args [][]byte) (keys []keyRef, ok bool) {
	argc := len(args)
	for _, ks := range c.keySpecs {
		if ks.flags&keyNotKey != 0 {
			continue
		}
		first, found, valid := ks.beginAt(args)
		if !valid {
			return nil, false
		}
		if !found {
			continue
		}
		var last, step int
		switch ks.find {
		case "range":
			step = ks.keyStep
			switch {
			case ks.lastKey >= 0:
				last = first + ks.lastKey
			case ks.limit == 0:
				last = argc + ks.lastKey
			default:
				last = first + ((argc-first)/ks.limit + ks.lastKey)
			}
		case "keynum":
			step = ks.keyStep
			at := first + ks.keyNumIdx
			if ks.keyNumIdx >= argc || at >= argc {
				return nil, false
			}
			n, ok := parseInt64(string(args[at]))
			if !ok || n < 0 {
				return nil, false
			}
			first += ks.firstKey
			// Redis adds the count as a C int: it wraps at 32 bits.
			last = first + int(int32(n)) - 1
		default:
			return nil, false
		}
		if last >= argc || last < first || first >= argc || step <= 0 {
			return nil, false
		}
		for i := first; i <= last; i += step {
			keys = append(keys, keyRef{pos: i, flags: ks.flags})
		}
		if ks.flags&keyIncomplete != 0 {
			return nil, false
		}
	}
	return keys, true
}

// beginAt returns where the spec's keys begin in args: found is false when
// its keyword is absent (the spec then names no key), valid false when the
// spec cannot say.
func (ks *keySpec) beginAt(args [][]byte) (first int, found, valid bool) {
	switch ks.begin {
	case "index":
		return ks.pos, true, true
	case "keyword":
		argc := len(args)
		start, end := argc+ks.startFrom, 1
		if ks.startFrom > 0 {
			start, end = ks.startFrom, argc-1
		}
		// NB: Redis stops before end, so the last argument it could
		// reach (the last forwards, the first backwards) is never a
		// keyword.
		for i := start; i != end; {
			if i >= argc || i < 1 {
				break
			}
			if wire.EqualFold(wire.CString(string(args[i])), ks.keyword) {
				return i + 1, true, true
			}
			if start <= end {
				i++
			} else {
				i--
			}
		}
		return 0, false, true
	}
	return 0, false, false
}

// keyFuncs are Redis 7.0's key functions (getkeys_proc), by command: they
// decide when the specs do not.
var keyFuncs = map[string]func(args [][]byte) []keyRef{
	"bitfield":          bitfieldKeys,
	"blmpop":            numKeys(0, 2, 3),
	"bzmpop":            numKeys(0, 2, 3),
	"eval":              numKeys(0, 2, 3),
	"evalsha":           numKeys(0, 2, 3),
	"eval_ro":           numKeys(0, 2, 3),
	"evalsha_ro":        numKeys(0, 2, 3),
	"fcall":             numKeys(0, 2, 3),
	"fcall_ro":          numKeys(0, 2, 3),
	"georadius":         georadiusKeys,
	"georadiusbymember": georadiusKeys,
	"lmpop":             numKeys(0, 1, 2),
	"migrate":           migrateKeys,
	"set":               setKeys,
	"sintercard":        numKeys(0, 1, 2),
	"sort":              sortKeys,
	"sort_ro":           func([][]byte) []keyRef { return []keyRef{{1, keyRO | keyAccess}} },
	"xread":             xreadKeys,
	"xreadgroup":        xreadKeys,
	"zdiff":             numKeys(0, 1, 2),
	"zinter":            numKeys(0, 1, 2),
	"zintercard":        numKeys(0, 1, 2),
	"zunion":            numKeys(0, 1, 2),
	"zmpop":             numKeys(0, 1, 2),
	"zdiffstore":        numKeys(1, 2, 3),
	"zinterstore":       numKeys(1, 2, 3),
	"zunionstore":       numKeys(1, 2, 3),
}

// numKeys is the key function of commands shaped
// CMD [dest] <numkeys> <key>... : keys after a count (read with atoi, as
// Redis does), then the destination if store is not 0; none if the count
// does not fit. Their flags are 0: the specs carry them.
func numKeys(store, count, first int) func(args [][]byte) []keyRef {
	return func(args [][]byte) []keyRef {
		if count >= len(args) {
			return nil
		}
		n := cAtoi(string(args[count]))
		if n < 1 || n > len(args)-first {
			return nil
		}
		keys := make([]keyRef, 0, n+1)
		for i := 0; i < n; i++ {
			keys = append(keys, keyRef{pos: first + i})
		}
		if store != 0 {
			keys = append(keys, keyRef{pos: store})
		}
		return keys
	}
}

// sortKeys: the sorted key, and the last STORE destination. The option
// scan is Redis's: LIMIT skips two arguments, GET and BY one, and STORE's
// own argument is scanned as an option in turn.
func sortKeys(args [][]byte) []keyRef {
	keys := []keyRef{{1, keyRO | keyAccess}}
	store := -1
	for i := 2; i < len(args); i++ {
		switch arg := wire.CString(string(args[i])); {
		case wire.EqualFold(arg, "limit"):
			i += 2
		case wire.EqualFold(arg, "store") && i+1 < len(args):
			store = i + 1
		case wire.EqualFold(arg, "get"), wire.EqualFold(arg, "by"):
			i++
		}
	}
	if store >= 0 {
		keys = append(keys, keyRef{store, keyOW | keyUpdate})
	}
	return keys
}

// migrateKeys: the key argument, or the keys after KEYS when the key
// argument is empty (none when it is not: a syntax error).
func migrateKeys(args [][]byte) []keyRef {
	first, n := 3, 1
	if len(args) > 6 {
	scan:
		for i := 6; i < len(args); i++ {
			switch arg := wire.CString(string(args[i])); {
			case wire.EqualFold(arg, "keys"):
				if len(args[3]) > 0 {
					n = 0
				} else {
					first, n = i+1, len(args)-(i+1)
				}
				break scan
			case wire.EqualFold(arg, "auth"):
				i++
			case wire.EqualFold(arg, "auth2"):
				i += 2
			}
		}
	}
	keys := make([]keyRef, 0, n)
	for i := 0; i < n; i++ {
		keys = append(keys, keyRef{first + i, keyRW | keyAccess | keyDelete})
	}
	return keys
}

// setKeys: the key, read and written with GET, overwritten without.
func setKeys(args [][]byte) []keyRef {
	for _, arg := range args[min(3, len(args)):] {
		if wire.EqualFold(wire.CString(string(arg)), "get") {
			return []keyRef{{1, keyRW | keyAccess | keyUpdate}}
		}
	}
	return []keyRef{{1, keyOW | keyUpdate}}
}

// bitfieldKeys: the key, read-only when every operation is a GET (or
// OVERFLOW).
func bitfieldKeys(args [][]byte) []keyRef {
	readonly := true
	for i := 2; i < len(args); i++ {
		rest := len(args) - i - 1
		switch arg := wire.CString(string(args[i])); {
		case wire.EqualFold(arg, "get") && rest >= 2:
			i += 2
		case (wire.EqualFold(arg, "set") || wire.EqualFold(arg, "incrby")) && rest >= 3:
			readonly = false
			i = len(args)
		case wire.EqualFold(arg, "overflow") && rest >= 1:
			i++
		default:
			readonly = false
			i = len(args)
		}
	}
	if readonly {
		return []keyRef{{1, keyRO | keyAccess}}
	}
	return []keyRef{{1, keyRW | keyAccess | keyUpdate}}
}

// georadiusKeys: the key, and the last STORE or STOREDIST destination.
func georadiusKeys(args [][]byte) []keyRef {
	stored := -1
	for i := 5; i < len(args); i++ {
		arg := wire.CString(string(args[i]))
		if (wire.EqualFold(arg, "store") || wire.EqualFold(arg, "storedist")) && i+1 < len(args) {
			stored = i + 1
			i++
		}
	}
	if stored < 0 {
		return []keyRef{{pos: 1}}
	}
	return []keyRef{{pos: 1}, {pos: stored}}
}

// xreadKeys: the first half of the arguments after STREAMS, found past the
// options XREAD and XREADGROUP take.
func xreadKeys(args [][]byte) []keyRef {
	streams := -1
scan:
	for i := 1; i < len(args); i++ {
		switch arg := wire.CString(string(args[i])); {
		case wire.EqualFold(arg, "block"), wire.EqualFold(arg, "count"):
			i++
		case wire.EqualFold(arg, "group"):
			i += 2
		case wire.EqualFold(arg, "noack"):
		case wire.EqualFold(arg, "streams"):
			streams = i
			break scan
		default:
			break scan
		}
	}
	if streams < 0 {
		return nil
	}
	n := len(args) - streams - 1
	if n == 0 || n%2 != 0 {
		return nil
	}
	keys := make([]keyRef, 0, n/2)
	for i := streams + 1; i < len(args)-n/2; i++ {
		keys = append(keys, keyRef{pos: i})
	}
	return keys
}

// cAtoi is C's atoi as glibc has it: leading white space, a sign, digits up
// to the first non-digit; a value beyond a long is clamped, then cut to an
// int's 32 bits.
func cAtoi(s string) int {
	s = wire.CString(s)
	i := 0
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	var n uint64
	over := false
	for ; i < len(s) && '0' <= s[i] && s[i] <= '9'; i++ {
		if n > (1<<63)/10 {
			over = true
		}
		n = n*10 + uint64(s[i]-'0')
		if n > 1<<63 {
			over = true
		}
	}
	var v int64
	switch {
	case over && neg:
		v = -1 << 63
	case over:
		v = 1<<63 - 1
	case neg:
		v = -int64(n)
	case n == 1<<63:
		v = 1<<63 - 1
	default:
		v = int64(n)
	}
	return int(int32(v))
}

// isSpace is C's isspace in the C locale.
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}
