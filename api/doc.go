// Package api is the contract's wire shapes and limits: the JSON bodies the
// service's HTTP API answers and accepts (product, order, audit, strategy,
// the purchase and admin bodies, the error body, the answers of /healthz
// and /readyz), the lines of the driver's -history file (HistoryLine) and
// the bounds the contract puts on a request. The server's
// handlers, the load driver's client, the demo and the tests all speak
// through these types, so a change to the wire is a change here and to the
// contract, nowhere else. (The server decodes a request body through a
// copy with pointer fields, to tell a missing field from a zero; its tests
// hold each copy to its type here.)
//
// The types carry only what goes over the wire, with the field names and
// order the contract gives; the service's own types (model, service) are
// converted to and from them at the edge.
package api
