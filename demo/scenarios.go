package demo

import (
	"fmt"
	"strings"

	"github.com/seckill/seckill/demo/lab"
	"github.com/seckill/seckill/demo/scenario"
)

// Scenarios returns every scenario, in the order the demo plays them.
func Scenarios() []lab.Scenario { return scenario.All() }

// Select returns the scenarios named in list, a comma-separated list of
// names, in the order given; an empty list is every scenario.
func Select(list string) ([]lab.Scenario, error) {
	all := Scenarios()
	if strings.TrimSpace(list) == "" {
		return all, nil
	}
	var out []lab.Scenario
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		found := false
		for _, sc := range all {
			if sc.Name == name {
				out = append(out, sc)
				found = true
				break
			}
		}
		if !found {
			return nil, fmt.Errorf("demo: no scenario %q (-list lists them: %s)", name, strings.Join(names(all), ", "))
		}
	}
	return out, nil
}

func names(scs []lab.Scenario) []string {
	out := make([]string, len(scs))
	for i, sc := range scs {
		out[i] = sc.Name
	}
	return out
}
