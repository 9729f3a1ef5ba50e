// Package mysqldsn holds the rule a MySQL DSN must follow here, checked
// where the setting is read (config) and where a connection is opened
// (store), without the drivers and embedded engines that store brings in.
// Its errors read "store:", as the rule is the store's.
package mysqldsn

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// ErrUnsafeCharset is returned for a DSN that names a charset other than
// utf8mb4, or a collation.
var ErrUnsafeCharset = errors.New("store: the connection must speak utf8mb4: " +
	"give no charset (or charset=utf8mb4) and no collation")

// CheckCharset refuses a DSN that names a connection charset other than
// utf8mb4, or a collation. Parameters are interpolated on the client, and
// with a multibyte charset such as gbk, big5, sjis or cp932 the escape of a
// quote can be swallowed by the byte before it: the input would reach past
// its string. go-sql-driver refuses unsafe collations with interpolation,
// but not unsafe charsets; every connection here speaks utf8mb4.
func CheckCharset(dsn string) error {
	_, query, _ := strings.Cut(dsn, "?")
	params, err := url.ParseQuery(query)
	if err != nil {
		return fmt.Errorf("store: parse the DSN's parameters: %w", err)
	}
	for key, values := range params {
		switch {
		case strings.EqualFold(key, "collation"):
			return ErrUnsafeCharset
		case strings.EqualFold(key, "charset"):
			for _, v := range values {
				if !strings.EqualFold(v, "utf8mb4") {
					return fmt.Errorf("%w (it says charset=%s)", ErrUnsafeCharset, v)
				}
			}
		}
	}
	return nil
}
