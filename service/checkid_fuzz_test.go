package service

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// FuzzCheckID holds the ID rule to its statement: checkID accepts exactly
// the strings of 1 to 64 characters of valid UTF-8 without control
// characters, so that two IDs are equal only when their bytes are.
func FuzzCheckID(f *testing.F) {
	for _, seed := range []string{"u-42", "", " ", "Carol", "😀", "中' OR 1=1; --", "a\tb", "a\x00b",
		"\xff", "\xe4\xb8", strings.Repeat("x", 64), strings.Repeat("x", 65), strings.Repeat("é", 64),
		"\u202e", "\u200b", "a\u0085b"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, id string) {
		n := utf8.RuneCountInString(id)
		want := utf8.ValidString(id) && n >= 1 && n <= maxIDLength && !strings.ContainsFunc(id, unicode.IsControl)
		if got := checkID(id) == nil; got != want {
			t.Fatalf("checkID(%q) accepts %v; want %v (%d characters, valid UTF-8 %v)", id, got, want, n, utf8.ValidString(id))
		}
	})
}
