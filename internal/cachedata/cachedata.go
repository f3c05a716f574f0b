package cachedata

import (
	"encoding/hex"
	"math/rand/v2"
	"strconv"
	"time"
)

// keySpace is the number of distinct ids a key is drawn from; hotKeys of
// them take hotShare of the draws.
const (
	keySpace = 1_000_000
	hotKeys  = keySpace / 50
	hotShare = 0.8
)

// epoch is the base of the generated timestamps: fixed, so that the output
// depends on the seed alone.
var epoch = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC).Unix()

// Gen generates cache-like commands; see the package doc for their shape.
// Owned by one goroutine.
type Gen struct {
	rng     *rand.Rand
	argv    [][]byte // scratch argv reused by Next; Commands copies it
	scratch []byte   // scratch for the values being built; reused
	pending []byte   // an EXPIRE owed after a counter's INCRBY, or nil
	counted int      // INCRBYs generated, for the every-fourth EXPIRE
}

// New returns a generator whose output is a function of seed alone.
func New(seed int64) *Gen {
	return &Gen{rng: rand.New(rand.NewPCG(uint64(seed), 0x9e3779b97f4a7c15))}
}

// Next appends one command, as a RESP array of bulk strings, to dst and
// returns the extended slice.
func (g *Gen) Next(dst []byte) []byte {
	return appendRESP(dst, g.next())
}

// Command returns the next command's argv, for a client's Do. The slices
// are the caller's (copied out of the generator's scratch).
func (g *Gen) Command() []any {
	argv := g.next()
	out := make([]any, len(argv))
	for i, a := range argv {
		out[i] = string(a)
	}
	return out
}

// Commands returns the next n commands' argvs, as Command does.
func (g *Gen) Commands(n int) [][]any {
	out := make([][]any, n)
	for i := range out {
		out[i] = g.Command()
	}
	return out
}

// FillRESP returns at least n bytes of commands as RESP (whole commands:
// it stops after the one that crosses n).
func (g *Gen) FillRESP(n int) []byte {
	out := make([]byte, 0, n+4<<10)
	for len(out) < n {
		out = g.Next(out)
	}
	return out
}

// appendRESP appends argv as a RESP array of bulk strings.
func appendRESP(dst []byte, argv [][]byte) []byte {
	dst = append(dst, '*')
	dst = strconv.AppendInt(dst, int64(len(argv)), 10)
	dst = append(dst, '\r', '\n')
	for _, a := range argv {
		dst = append(dst, '$')
		dst = strconv.AppendInt(dst, int64(len(a)), 10)
		dst = append(dst, '\r', '\n')
		dst = append(dst, a...)
		dst = append(dst, '\r', '\n')
	}
	return dst
}

// next builds the next command's argv in the generator's scratch: valid
// until the next call.
func (g *Gen) next() [][]byte {
	g.argv = g.argv[:0]
	g.scratch = g.scratch[:0]
	if g.pending != nil {
		key := g.pending
		g.pending = nil
		return g.args("EXPIRE", string(key), "86400")
	}
	switch p := g.rng.Float64(); {
	case p < 0.40:
		return g.document()
	case p < 0.65:
		return g.session()
	case p < 0.90:
		return g.short()
	default:
		return g.counter()
	}
}

// args sets the argv to the given strings.
func (g *Gen) args(a ...string) [][]byte {
	for _, s := range a {
		g.argv = append(g.argv, []byte(s))
	}
	return g.argv
}

// id draws an id from the skewed key space.
func (g *Gen) id() int {
	if g.rng.Float64() < hotShare {
		return g.rng.IntN(hotKeys)
	}
	return g.rng.IntN(keySpace)
}

// hexID returns n random bytes in hex.
func (g *Gen) hexID(n int) string {
	var b [32]byte
	for i := range n {
		b[i] = byte(g.rng.Uint32())
	}
	return hex.EncodeToString(b[:n])
}

// stamp returns a timestamp within 30 days of the epoch, RFC 3339.
func (g *Gen) stamp() string {
	return time.Unix(epoch+g.rng.Int64N(30*86400), 0).UTC().Format(time.RFC3339)
}

func (g *Gen) pick(list []string) string { return list[g.rng.IntN(len(list))] }

var (
	firstNames = []string{"alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy", "mallory", "oscar", "peggy", "rupert", "sybil", "trent", "victor", "walter", "yusuf", "zoe"}
	lastNames  = []string{"smith", "jones", "garcia", "miller", "davis", "lopez", "wilson", "anderson", "thomas", "moore", "martin", "lee", "walker", "young", "king"}
	domains    = []string{"example.com", "mail.example.org", "corp.example.net", "shop.example.io"}
	cities     = []string{"Berlin", "Lyon", "Porto", "Milan", "Austin", "Osaka", "Toronto", "Dublin", "Madrid", "Oslo"}
	countries  = []string{"DE", "FR", "PT", "IT", "US", "JP", "CA", "IE", "ES", "NO"}
	streets    = []string{"Main Street", "Station Road", "Church Lane", "Park Avenue", "Mill Road", "High Street"}
	tags       = []string{"new", "sale", "bestseller", "eco", "limited", "gift", "premium", "clearance", "bundle", "refurbished", "exclusive", "seasonal"}
	categories = []string{"electronics", "books", "garden", "kitchen", "toys", "sports", "fashion", "beauty", "automotive", "office"}
	adjectives = []string{"Compact", "Wireless", "Organic", "Classic", "Smart", "Portable", "Deluxe", "Ultra", "Vintage", "Modular"}
	nouns      = []string{"Speaker", "Backpack", "Kettle", "Lamp", "Headphones", "Notebook", "Blender", "Jacket", "Charger", "Watch"}
	roles      = []string{"customer", "customer", "customer", "admin", "support", "partner"}
	plans      = []string{"free", "basic", "pro", "enterprise"}
	locales    = []string{"en-US", "en-GB", "de-DE", "fr-FR", "es-ES", "ja-JP", "pt-BR"}
	agents     = []string{
		"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
		"Mozilla/5.0 (Macintosh; Intel Mac OS X 14_6) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15",
		"Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148",
		"Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0",
	}
	flagNames  = []string{"checkout_v2", "dark_mode", "new_search", "beta_banner", "fast_shipping", "reco_engine"}
	flagValues = []string{"on", "off", "true", "false", "control", "variant_a", "variant_b"}
	statuses   = []string{"ok", "pending", "failed", "shipped", "delivered", "cancelled"}
	counters   = []string{"pageviews", "logins", "cart_adds", "api_calls", "downloads", "likes"}
	sessFields = []string{"user_id", "csrf", "created_at", "last_seen", "ip", "user_agent", "locale", "cart_items", "theme", "flags", "ttl", "referrer"}
)

// document builds SET user:<id>|product:<id> <json> [EX 3600].
func (g *Gen) document() [][]byte {
	id := g.id()
	var key string
	b := g.scratch
	if g.rng.IntN(2) == 0 {
		key = "user:" + strconv.Itoa(id)
		b = g.user(b, id)
	} else {
		key = "product:" + strconv.Itoa(id)
		b = g.product(b, id)
	}
	g.scratch = b
	g.argv = append(g.argv, []byte("SET"), []byte(key), b)
	if g.rng.IntN(2) == 0 {
		g.argv = append(g.argv, []byte("EX"), []byte("3600"))
	}
	return g.argv
}

// appendField appends ,"name": (or "name": first) to b.
func appendField(b []byte, first bool, name string) []byte {
	if !first {
		b = append(b, ',')
	}
	b = append(b, '"')
	b = append(b, name...)
	return append(b, '"', ':')
}

func appendStr(b []byte, s string) []byte {
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// user appends a user object of roughly 300 B to 1.5 KiB.
func (g *Gen) user(b []byte, id int) []byte {
	first, last := g.pick(firstNames), g.pick(lastNames)
	b = append(b, '{')
	b = appendField(b, true, "id")
	b = strconv.AppendInt(b, int64(id), 10)
	b = appendField(b, false, "uuid")
	b = appendStr(b, g.hexID(16))
	b = appendField(b, false, "name")
	b = appendStr(b, first+" "+last)
	b = appendField(b, false, "email")
	b = appendStr(b, first+"."+last+strconv.Itoa(id%1000)+"@"+g.pick(domains))
	b = appendField(b, false, "role")
	b = appendStr(b, g.pick(roles))
	b = appendField(b, false, "plan")
	b = appendStr(b, g.pick(plans))
	b = appendField(b, false, "locale")
	b = appendStr(b, g.pick(locales))
	b = appendField(b, false, "verified")
	b = strconv.AppendBool(b, g.rng.IntN(4) != 0)
	b = appendField(b, false, "created_at")
	b = appendStr(b, g.stamp())
	b = appendField(b, false, "last_login")
	b = appendStr(b, g.stamp())
	b = appendField(b, false, "login_count")
	b = strconv.AppendInt(b, int64(g.rng.IntN(5000)), 10)
	b = appendField(b, false, "addresses")
	b = append(b, '[')
	for i := range 1 + g.rng.IntN(3) {
		if i > 0 {
			b = append(b, ',')
		}
		c := g.rng.IntN(len(cities))
		b = append(b, '{')
		b = appendField(b, true, "type")
		b = appendStr(b, []string{"home", "work", "billing"}[i])
		b = appendField(b, false, "street")
		b = appendStr(b, strconv.Itoa(1+g.rng.IntN(200))+" "+g.pick(streets))
		b = appendField(b, false, "city")
		b = appendStr(b, cities[c])
		b = appendField(b, false, "postcode")
		b = appendStr(b, strconv.Itoa(10000+g.rng.IntN(89999)))
		b = appendField(b, false, "country")
		b = appendStr(b, countries[c])
		b = append(b, '}')
	}
	b = append(b, ']')
	b = appendField(b, false, "preferences")
	b = append(b, '{')
	b = appendField(b, true, "newsletter")
	b = strconv.AppendBool(b, g.rng.IntN(2) == 0)
	b = appendField(b, false, "theme")
	b = appendStr(b, []string{"light", "dark", "system"}[g.rng.IntN(3)])
	b = appendField(b, false, "currency")
	b = appendStr(b, []string{"EUR", "USD", "GBP", "JPY"}[g.rng.IntN(4)])
	b = append(b, '}')
	b = appendField(b, false, "recent_orders")
	b = append(b, '[')
	for i := range g.rng.IntN(6) {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '{')
		b = appendField(b, true, "order_id")
		b = appendStr(b, "ord_"+g.hexID(6))
		b = appendField(b, false, "total")
		b = strconv.AppendFloat(b, float64(g.rng.IntN(50000))/100, 'f', 2, 64)
		b = appendField(b, false, "status")
		b = appendStr(b, g.pick(statuses))
		b = appendField(b, false, "placed_at")
		b = appendStr(b, g.stamp())
		b = append(b, '}')
	}
	b = append(b, ']')
	return append(b, '}')
}

// product appends a product object of roughly 400 B to 3 KiB.
func (g *Gen) product(b []byte, id int) []byte {
	b = append(b, '{')
	b = appendField(b, true, "id")
	b = strconv.AppendInt(b, int64(id), 10)
	b = appendField(b, false, "sku")
	b = appendStr(b, "SKU-"+strconv.Itoa(100000+id))
	b = appendField(b, false, "title")
	b = appendStr(b, g.pick(adjectives)+" "+g.pick(nouns)+" "+strconv.Itoa(1+g.rng.IntN(9))+"00")
	b = appendField(b, false, "category")
	b = appendStr(b, g.pick(categories))
	b = appendField(b, false, "price")
	b = strconv.AppendFloat(b, float64(99+g.rng.IntN(99900))/100, 'f', 2, 64)
	b = appendField(b, false, "currency")
	b = appendStr(b, "EUR")
	b = appendField(b, false, "in_stock")
	b = strconv.AppendInt(b, int64(g.rng.IntN(500)), 10)
	b = appendField(b, false, "rating")
	b = strconv.AppendFloat(b, 1+float64(g.rng.IntN(40))/10, 'f', 1, 64)
	b = appendField(b, false, "updated_at")
	b = appendStr(b, g.stamp())
	b = appendField(b, false, "tags")
	b = append(b, '[')
	for i := range 1 + g.rng.IntN(5) {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendStr(b, g.pick(tags))
	}
	b = append(b, ']')
	b = appendField(b, false, "variants")
	b = append(b, '[')
	for i := range 1 + g.rng.IntN(6) {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '{')
		b = appendField(b, true, "sku")
		b = appendStr(b, "SKU-"+strconv.Itoa(100000+id)+"-"+strconv.Itoa(i))
		b = appendField(b, false, "color")
		b = appendStr(b, []string{"black", "white", "red", "blue", "green", "grey"}[g.rng.IntN(6)])
		b = appendField(b, false, "size")
		b = appendStr(b, []string{"XS", "S", "M", "L", "XL"}[g.rng.IntN(5)])
		b = appendField(b, false, "stock")
		b = strconv.AppendInt(b, int64(g.rng.IntN(100)), 10)
		b = append(b, '}')
	}
	b = append(b, ']')
	b = appendField(b, false, "reviews")
	b = append(b, '[')
	for i := range g.rng.IntN(4) {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '{')
		b = appendField(b, true, "user_id")
		b = strconv.AppendInt(b, int64(g.id()), 10)
		b = appendField(b, false, "stars")
		b = strconv.AppendInt(b, int64(1+g.rng.IntN(5)), 10)
		b = appendField(b, false, "text")
		b = appendStr(b, g.review())
		b = appendField(b, false, "created_at")
		b = appendStr(b, g.stamp())
		b = append(b, '}')
	}
	b = append(b, ']')
	return append(b, '}')
}

var reviewWords = []string{"great", "quality", "fast", "delivery", "works", "as", "described", "would", "buy", "again", "battery", "lasts", "long", "not", "worth", "the", "price", "excellent", "value", "for", "money", "broke", "after", "a", "week", "perfect", "gift"}

// review returns 8 to 30 words.
func (g *Gen) review() string {
	var b []byte
	for i := range 8 + g.rng.IntN(23) {
		if i > 0 {
			b = append(b, ' ')
		}
		b = append(b, g.pick(reviewWords)...)
	}
	return string(b)
}

// session builds HSET session:<hex> with 6 to 12 fields.
func (g *Gen) session() [][]byte {
	g.argv = append(g.argv, []byte("HSET"), []byte("session:"+g.hexID(16)))
	n := 6 + g.rng.IntN(7)
	for _, i := range g.rng.Perm(len(sessFields))[:n] {
		var v string
		switch sessFields[i] {
		case "user_id":
			v = strconv.Itoa(g.id())
		case "csrf":
			v = g.hexID(16)
		case "created_at", "last_seen":
			v = strconv.FormatInt(epoch+g.rng.Int64N(30*86400), 10)
		case "ip":
			v = strconv.Itoa(10+g.rng.IntN(200)) + "." + strconv.Itoa(g.rng.IntN(256)) + "." + strconv.Itoa(g.rng.IntN(256)) + "." + strconv.Itoa(1+g.rng.IntN(254))
		case "user_agent":
			v = g.pick(agents)
		case "locale":
			v = g.pick(locales)
		case "cart_items":
			v = strconv.Itoa(g.rng.IntN(12))
		case "theme":
			v = []string{"light", "dark"}[g.rng.IntN(2)]
		case "flags":
			v = g.pick(flagNames) + "," + g.pick(flagNames)
		case "ttl":
			v = "1800"
		case "referrer":
			v = "https://www." + g.pick(domains) + "/" + g.pick(categories)
		}
		g.argv = append(g.argv, []byte(sessFields[i]), []byte(v))
	}
	return g.argv
}

// short builds a SET of a token, a flag, a small number or a status.
func (g *Gen) short() [][]byte {
	id := strconv.Itoa(g.id())
	switch g.rng.IntN(4) {
	case 0:
		return g.args("SET", "token:"+id, g.hexID(16), "EX", "900")
	case 1:
		return g.args("SET", "flag:"+g.pick(flagNames)+":"+id, g.pick(flagValues))
	case 2:
		return g.args("SET", "rate:"+id, strconv.Itoa(g.rng.IntN(1000)))
	default:
		return g.args("SET", "status:"+id, g.pick(statuses))
	}
}

// counter builds INCRBY counter:<name>:<id> <1..100>; every fourth one is
// followed, by the next call, by EXPIRE <key> 86400.
func (g *Gen) counter() [][]byte {
	key := "counter:" + g.pick(counters) + ":" + strconv.Itoa(g.id())
	g.counted++
	if g.counted%4 == 0 {
		g.pending = []byte(key)
	}
	return g.args("INCRBY", key, strconv.Itoa(1+g.rng.IntN(100)))
}
