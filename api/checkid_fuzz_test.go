package api

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// FuzzCheckID holds the ID rule to its statement: CheckID accepts exactly
// the strings of 1 to 64 characters of valid UTF-8 without control
// characters, so that two IDs are equal only when their bytes are. A bad
// length or encoding is the verdict before a control character, and
// ScanID's blank is strings.TrimSpace's.
func FuzzCheckID(f *testing.F) {
	for _, seed := range []string{"u-42", "", " ", "Carol", "😀", "中' OR 1=1; --", "a\tb", "a\x00b",
		"\xff", "\xe4\xb8", strings.Repeat("x", 64), strings.Repeat("x", 65), strings.Repeat("é", 64),
		"\u202e", "\u200b", "a\u0085b", "\u00a0", "\u3000\u2003", " \u00a0 x", "\x7f", "\u009f", "\ufffd",
		"\xef\xbf\xbd", "a\x00\xff", strings.Repeat("é", 65), strings.Repeat("x", 64) + "\x00",
		strings.Repeat(" ", 64), "\u2028"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, id string) {
		n := utf8.RuneCountInString(id)
		var want string
		switch {
		case n < 1 || n > MaxIDLength || !utf8.ValidString(id):
			want = "bad length or encoding"
		case strings.ContainsFunc(id, unicode.IsControl):
			want = "control character"
		}
		err := CheckID(id)
		if got := err == nil; got != (want == "") {
			t.Fatalf("CheckID(%q) accepts %v; want %v (%d characters, valid UTF-8 %v)", id, got, want == "", n, utf8.ValidString(id))
		}
		if err != nil && err.Error() != want {
			t.Errorf("CheckID(%q) = %q; want %q", id, err, want)
		}
		blank, serr := ScanID(id)
		if (serr == nil) != (err == nil) {
			t.Errorf("ScanID(%q) = %v; want CheckID's %v", id, serr, err)
		}
		if wantBlank := err == nil && strings.TrimSpace(id) == ""; blank != wantBlank {
			t.Errorf("ScanID(%q) blank = %v; want %v", id, blank, wantBlank)
		}
	})
}
