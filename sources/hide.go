package sources

import (
	"regexp"
	"strconv"
	"strings"
)

// WalkStrings calls fn with the JSON pointer and value of every string in
// v.
func WalkStrings(v any, path string, fn func(path, v string)) {
	switch t := v.(type) {
	case string:
		fn(path, t)
	case map[string]any:
		for k, e := range t {
			WalkStrings(e, path+"/"+EscapePointer(k), fn)
		}
	case []any:
		for i, e := range t {
			WalkStrings(e, path+"/"+strconv.Itoa(i), fn)
		}
	}
}

// EscapePointer escapes a map key for a JSON pointer (RFC 6901).
func EscapePointer(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}

// HideValues hides each of values in msg: quoted, as the API server and
// the validators quote what they refuse, and, from three characters on,
// wherever it stands as a word of its own.
func HideValues(msg string, values []string) string {
	for _, v := range values {
		msg = strings.ReplaceAll(msg, strconv.Quote(v), `"***"`)
		msg = strings.ReplaceAll(msg, `"`+v+`"`, `"***"`)
		if len(v) >= 3 {
			word := regexp.MustCompile(`(^|[^\pL\pN_])` + regexp.QuoteMeta(v) + `($|[^\pL\pN_])`)
			for word.MatchString(msg) {
				msg = word.ReplaceAllString(msg, "${1}***${2}")
			}
		}
	}
	return msg
}

// HiddenError is an error whose text hides decrypted values; what it
// wraps still tells its kind (cut short, unanswered, invalid).
type HiddenError struct {
	Err error
	Msg string
}

func (e *HiddenError) Error() string { return e.Msg }
func (e *HiddenError) Unwrap() error { return e.Err }
