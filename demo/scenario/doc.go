// Package scenario holds the workshop's stories, one file per lesson:
// the sale under every strategy; setnx's clock and unlock, a lease
// overrun, a killed holder, a Redis node down or restarted (each lock's
// failure beside its fix); batching, a history checked for
// linearizability, a rate limit's counter; reserve, the order's life, a
// Redis Cluster failover and a Galera cluster. All lists them in the
// order the demo plays them; each plays in a lab.World of its own.
package scenario
