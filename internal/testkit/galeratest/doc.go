// Package galeratest holds the tests of the service on a MySQL cluster: a
// MariaDB Galera Cluster of the test's own (make test-galera), and the
// order IDs a cluster's stepped AUTO_INCREMENT gives, on a MariaDB of the
// test's own that steps them as a cluster's node does (make test).
package galeratest
