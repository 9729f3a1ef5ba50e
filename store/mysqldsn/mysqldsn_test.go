package mysqldsn_test

import (
	"errors"
	"testing"

	"github.com/seckill/seckill/store/mysqldsn"
)

func TestCheckCharset(t *testing.T) {
	for _, tc := range []struct {
		dsn  string
		want error
	}{
		{"root@tcp(127.0.0.1:3306)/db", nil},
		{"root@tcp(127.0.0.1:3306)/db?parseTime=true", nil},
		{"root@tcp(127.0.0.1:3306)/db?charset=utf8mb4", nil},
		{"root@tcp(127.0.0.1:3306)/db?CHARSET=UTF8MB4", nil},
		{"root@tcp(127.0.0.1:3306)/db?charset=gbk", mysqldsn.ErrUnsafeCharset},
		{"root@tcp(127.0.0.1:3306)/db?parseTime=true&charset=sjis", mysqldsn.ErrUnsafeCharset},
		{"root@tcp(127.0.0.1:3306)/db?charset=utf8mb4&charset=cp932", mysqldsn.ErrUnsafeCharset},
		{"root@tcp(127.0.0.1:3306)/db?Charset=latin1", mysqldsn.ErrUnsafeCharset},
		{"root@tcp(127.0.0.1:3306)/db?collation=utf8mb4_bin", mysqldsn.ErrUnsafeCharset},
	} {
		if err := mysqldsn.CheckCharset(tc.dsn); !errors.Is(err, tc.want) {
			t.Errorf("CheckCharset(%q) = %v; want %v", tc.dsn, err, tc.want)
		}
	}
}

// TestCheckCharsetNamesWhatItRefuses: the error says which charset the DSN
// named.
func TestCheckCharsetNamesWhatItRefuses(t *testing.T) {
	const want = "store: the connection must speak utf8mb4: give no charset (or charset=utf8mb4) and no collation (it says charset=gbk)"
	if err := mysqldsn.CheckCharset("root@tcp(127.0.0.1:3306)/db?charset=gbk"); err == nil || err.Error() != want {
		t.Errorf("CheckCharset(charset=gbk) = %v; want %q", err, want)
	}
}

func TestCheckCharsetRefusesUnparsableParameters(t *testing.T) {
	if err := mysqldsn.CheckCharset("root@tcp(127.0.0.1:3306)/db?charset=%zz"); err == nil {
		t.Error("CheckCharset(charset=%zz) = nil; want an error")
	}
}
