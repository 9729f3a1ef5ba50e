package app

import (
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// Version is the module's version as the Go toolchain stamped it into the
// binary (a tag, or a pseudo-version from the VCS), "devel" when it has
// none.
func Version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}

// buildInfo is seckill_build_info{version,goversion}, always 1.
func buildInfo() prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "seckill_build_info",
		Help:        "Always 1: the version of seckill (devel when the binary has none) and the Go release that built it.",
		ConstLabels: prometheus.Labels{"version": Version(), "goversion": runtime.Version()},
	})
	g.Set(1)
	return g
}
