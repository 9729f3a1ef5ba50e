// Package report holds what one run of the load driver measured, and writes
// it for people and for programs. A Report has the run's settings, the
// machine the driver ran on and a Result per strategy: its answers by
// outcome (the Outcome* keys), its latencies, its seconds, its audit, the
// check of its history, what became of its promises (the 202s of reserve)
// and, over a catalogue, its hottest and broken products. Package driver fills a Report; Result.Judge sums a result up
// in a few words (the driver's Verdict), and Report.Failures says why a
// run should be called a failure.
//
// WriteTable prints a report within TableWidth columns, WriteWideTable with
// every column, WriteJSON every figure (it reads back into a Report),
// WriteCSV a row per second of each run, and WriteHTML one self-contained
// page with charts. The charts are inline SVG drawn here: a Go library
// that draws SVG on the server (github.com/go-analyze/charts,
// gonum.org/v1/plot) would save little code once fitted to this page, yet
// drop each bar's tooltip and each second's step and bring a font renderer
// along, and one that draws in the browser loads its script from a network.
package report
