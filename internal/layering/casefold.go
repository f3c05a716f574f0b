package layering

// unicodeFolds are the standard library's functions that map or compare
// letters by Unicode case, by import path: the ones that take the Kelvin
// sign U+212A for 'k' and the long s U+017F for 's'. A name from the
// network (a command, a subcommand, an option word, a directive) must be
// matched the way Redis matches it, ASCII letters only: proxy/wire's
// Lower, Upper and EqualFold. casefold_test.go fails on any use of these
// in the code of proxy/ and cmd/ that allowedFolds does not list.
var unicodeFolds = map[string][]string{
	"strings": {"ToLower", "ToUpper", "ToTitle", "Title", "EqualFold", "ToLowerSpecial", "ToUpperSpecial", "ToTitleSpecial"},
	"bytes":   {"ToLower", "ToUpper", "ToTitle", "Title", "EqualFold", "ToLowerSpecial", "ToUpperSpecial", "ToTitleSpecial"},
	"unicode": {"ToLower", "ToUpper", "ToTitle", "To", "SimpleFold"},
	// golang.org/x/text/cases folds by Unicode too; any use of it counts.
	"golang.org/x/text/cases": nil,
}

// allowedFolds lists, by "<file>:<function>" (the file's path in the
// module, the enclosing function's name, "Type.Method" for a method), the
// uses of unicodeFolds that read no name from the network, each with why.
// None today: every name is matched through proxy/wire.
var allowedFolds = map[string]string{}

// foldChecked reports whether a package's code (by its path in the module)
// is held to the ASCII-only rule for names: the proxy's packages and the
// commands, which read what clients, replicas and the primary send, and
// the configuration.
func foldChecked(pkg string) bool {
	return pkg == "proxy" || len(pkg) > 6 && pkg[:6] == "proxy/" || pkg == "cmd" || len(pkg) > 4 && pkg[:4] == "cmd/"
}
