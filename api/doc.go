// Package api is the contract's wire shapes and limits: the JSON bodies the
// service's HTTP API answers and accepts (product, order, audit, strategy,
// the purchase and admin bodies, the error body) and the bounds the
// contract puts on a request. The server's handlers, the load driver's
// client, the demo and the tests all speak through these types, so a change
// to the wire is a change here and to the contract, nowhere else.
//
// The types carry only what goes over the wire, with the field names and
// order the contract gives; the service's own types (model, service) are
// converted to and from them at the edge.
package api
