package reserve

import (
	"strconv"

	"github.com/redis/go-redis/v9"
)

// Buckets is how many streams the reservations are spread over. A
// product's keys are in the hash slot of its bucket's stream.
const Buckets = 16

// Store is the reserve strategy's keys on one Redis (a node, or a
// cluster through a cluster client), under a key prefix.
type Store struct {
	rdb    redis.UniversalClient
	prefix string
	acks   Acks
}

// New returns the store of rdb's keys under prefix.
func New(rdb redis.UniversalClient, prefix string) *Store {
	return &Store{rdb: rdb, prefix: prefix}
}

// Keys are the Redis keys of one product.
type Keys struct {
	// Counter is a hash: the stock left ("stock") and the generation of
	// the database's stock it was loaded from ("gen").
	Counter string
	// Units maps each buyer to the units reserved in this generation.
	Units string
	// Requests maps each request ID to its Record.
	Requests string
	// Stream is the stream of reservations of the product's bucket.
	Stream string
	// Where is the bucket's index of request IDs: each one maps to the
	// product whose Requests hold its record.
	Where string
}

// Bucket is the bucket of a product.
func Bucket(product int64) int { return int(product % Buckets) }

// KeysOf returns the keys of a product.
func (s *Store) KeysOf(product int64) Keys {
	tag := s.prefix + "reserve:{" + strconv.Itoa(Bucket(product)) + "}:"
	p := tag + "p:" + strconv.FormatInt(product, 10)
	return Keys{Counter: p, Units: p + ":units", Requests: p + ":req", Stream: tag + "stream", Where: tag + "where"}
}

// DeadOf returns the dead-letter stream of a bucket: the reservations the
// writers gave up on, with the reason.
func (s *Store) DeadOf(bucket int) string {
	return s.prefix + "reserve:{" + strconv.Itoa(bucket) + "}:dead"
}

// StreamOf returns the stream of a bucket.
func (s *Store) StreamOf(bucket int) string {
	return s.prefix + "reserve:{" + strconv.Itoa(bucket) + "}:stream"
}
