package service

import "time"

// The defaults of Config that are the service's own; LockWait and LockTTL
// fall back on the lock library's (locker.DefaultWait, locker.DefaultTTL).
const (
	// DefaultKeyPrefix starts every Redis key an instance makes when
	// Config.KeyPrefix is empty.
	DefaultKeyPrefix = "seckill:"
	// DefaultBatch is the most purchases of one product one hold of its
	// lock sells when Config.Batch is not set.
	DefaultBatch = 100
	// DefaultDBTimeout bounds every call to the database when
	// Config.DBTimeout is not set.
	DefaultDBTimeout = 3 * time.Second
)
