package api

import (
	"errors"
	"unicode"
	"unicode/utf8"
)

// The contract's rule for the IDs a client names (user_id, request_id).

// CheckID accepts 1 to MaxIDLength characters of valid UTF-8 without control
// characters: IDs are compared byte for byte, so nothing that could make
// two different inputs look alike, or be rewritten on the way, gets in.
func CheckID(id string) error {
	_, err := ScanID(id)
	return err
}

// ScanID is CheckID in one pass over id, on every purchase, which also
// reports whether id is blank: nothing but white space (unicode.IsSpace),
// as strings.TrimSpace sees it. A bad length or encoding is reported
// before a control character, as CheckID's statement reads.
func ScanID(id string) (blank bool, err error) {
	n, control := 0, false
	blank = true
	for i := 0; i < len(id); n++ {
		if n == MaxIDLength {
			return false, errors.New("bad length or encoding")
		}
		if c := id[i]; c < utf8.RuneSelf {
			// ASCII, most IDs: its white space but ' ' is control.
			control = control || c < ' ' || c == 0x7f
			blank = blank && c == ' '
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(id[i:])
		if r == utf8.RuneError && size == 1 {
			return false, errors.New("bad length or encoding")
		}
		control = control || unicode.IsControl(r)
		blank = blank && unicode.IsSpace(r)
		i += size
	}
	switch {
	case n == 0:
		return false, errors.New("bad length or encoding")
	case control:
		return false, errors.New("control character")
	}
	return blank, nil
}
