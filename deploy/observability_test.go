package deploy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metricsql"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"gopkg.in/yaml.v3"

	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/testkit/apptest"
)

// The observability files, relative to this package's directory.
const (
	prometheusConf     = "prometheus.yml"
	grafanaDatasources = "grafana/provisioning/datasources/prometheus.yml"
	grafanaProviders   = "grafana/provisioning/dashboards/seckill.yml"
	dashboardFile      = "grafana/dashboards/seckill.json"
)

// dashboard is the part of a Grafana dashboard these tests read.
type dashboard struct {
	UID    string  `json:"uid"`
	Panels []panel `json:"panels"`
}

type panel struct {
	Title      string     `json:"title"`
	Datasource datasource `json:"datasource"`
	Targets    []struct {
		Expr       string     `json:"expr"`
		Datasource datasource `json:"datasource"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a row's
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// query is one PromQL expression of the dashboard.
type query struct {
	panel, expr string
}

func loadDashboard(t *testing.T) []query {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("parse %s: %v", dashboardFile, err)
	}
	var out []query
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			walk(p.Panels)
			for _, tg := range p.Targets {
				out = append(out, query{p.Title, tg.Expr})
				for _, ds := range []datasource{p.Datasource, tg.Datasource} {
					if ds.UID != "" && (ds.Type != "prometheus" || ds.UID != provisionedUID(t)) {
						t.Errorf("%s: panel %q uses data source %+v; want the provisioned Prometheus (uid %s)",
							dashboardFile, p.Title, ds, provisionedUID(t))
					}
				}
			}
		}
	}
	walk(d.Panels)
	if len(out) == 0 {
		t.Fatalf("%s has no queries", dashboardFile)
	}
	return out
}

// provisionedUID returns the uid of the Prometheus data source Grafana is
// given.
func provisionedUID(t *testing.T) string {
	t.Helper()
	var f struct {
		Datasources []struct {
			UID  string `yaml:"uid"`
			Type string `yaml:"type"`
			URL  string `yaml:"url"`
		} `yaml:"datasources"`
	}
	readYAML(t, grafanaDatasources, &f)
	if len(f.Datasources) != 1 || f.Datasources[0].Type != "prometheus" || f.Datasources[0].UID == "" {
		t.Fatalf("%s: data sources %+v; want one Prometheus with a uid", grafanaDatasources, f.Datasources)
	}
	return f.Datasources[0].UID
}

func readYAML(t *testing.T, file string, v any) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("parse %s: %v", file, err)
	}
}

// selector is one metric a query reads, with its label matchers.
type selector struct {
	name    string
	filters []metricsql.LabelFilter
}

// parsed is what a query reads: its metrics and the labels it groups by.
type parsed struct {
	selectors []selector
	by        []string
}

// parseQuery parses a dashboard query (with Grafana's variables filled in)
// and says what is wrong with it for Prometheus.
func parseQuery(q query) (parsed, []string) {
	var p parsed
	e, err := metricsql.Parse(fillGrafanaVars(q.expr))
	if err != nil {
		return p, []string{fmt.Sprintf("panel %q: query %q does not parse: %v", q.panel, q.expr, err)}
	}
	var problems []string
	metricsql.VisitAll(e, func(e metricsql.Expr) {
		switch e := e.(type) {
		case *metricsql.MetricExpr:
			for _, group := range e.LabelFilterss {
				var s selector
				for _, f := range group {
					if f.Label == "__name__" && !f.IsRegexp && !f.IsNegative {
						s.name = f.Value
					} else {
						s.filters = append(s.filters, f)
					}
				}
				if s.name == "" {
					problems = append(problems, fmt.Sprintf("panel %q: query %q selects by something other than a metric name", q.panel, q.expr))
				}
				p.selectors = append(p.selectors, s)
			}
		case *metricsql.AggrFuncExpr:
			p.by = append(p.by, e.Modifier.Args...)
		case *metricsql.FuncExpr:
			// PromQL, unlike MetricsQL, wants a range for every rollup.
			if metricsql.IsRollupFunc(e.Name) {
				for _, a := range e.Args {
					if r, ok := a.(*metricsql.RollupExpr); !ok || r.Window == nil {
						problems = append(problems, fmt.Sprintf("panel %q: query %q: %s() of something without a [range]", q.panel, q.expr, e.Name))
					}
				}
			}
		}
	})
	if len(p.selectors) == 0 {
		problems = append(problems, fmt.Sprintf("panel %q: query %q reads no metric", q.panel, q.expr))
	}
	return p, problems
}

// fillGrafanaVars stands for the Grafana variables a query may use.
func fillGrafanaVars(expr string) string {
	return strings.NewReplacer("$__rate_interval", "1m", "$__interval", "1m").Replace(expr)
}

// exposed are the series an instance exposes, by the name a query uses
// (a histogram's _bucket, _sum and _count apart): their label names and
// the values each label takes.
type exposed map[string]map[string]map[string]bool

// scrape reads an instance's /metrics.
func scrape(t *testing.T, url string) exposed {
	t.Helper()
	out := exposed{}
	for name, f := range getMetrics(t, url) {
		out.addFamily(name, f)
	}
	return out
}

// getMetrics gets and parses an instance's /metrics.
func getMetrics(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics = %d", res.StatusCode)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(res.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return families
}

// addFamily adds the series of family f, named name, by the names a query
// uses (a histogram's _bucket, _sum and _count apart).
func (ex exposed) addFamily(name string, f *dto.MetricFamily) {
	for _, m := range f.GetMetric() {
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM:
			for _, b := range m.GetHistogram().GetBucket() {
				ex.add(name+"_bucket", m, "le", fmt.Sprint(b.GetUpperBound()))
			}
			ex.add(name+"_bucket", m, "le", "+Inf")
			ex.add(name+"_sum", m)
			ex.add(name+"_count", m)
		case dto.MetricType_SUMMARY:
			ex.add(name, m, "quantile", "")
			ex.add(name+"_sum", m)
			ex.add(name+"_count", m)
		default:
			ex.add(name, m)
		}
	}
}

// add records the labels of series m under name, with extra label pairs
// (name, value, name, value...) besides its own.
func (ex exposed) add(name string, m *dto.Metric, extra ...string) {
	labels := ex[name]
	if labels == nil {
		labels = map[string]map[string]bool{}
		ex[name] = labels
	}
	set := func(k, v string) {
		if labels[k] == nil {
			labels[k] = map[string]bool{}
		}
		labels[k][v] = true
	}
	for _, l := range m.GetLabel() {
		set(l.GetName(), l.GetValue())
	}
	for i := 0; i+1 < len(extra); i += 2 {
		set(extra[i], extra[i+1])
	}
}

// targetLabels are the labels Prometheus adds to every scraped series.
func targetLabels() []string { return []string{"job", "instance"} }

// check holds one parsed query against what an instance exposes: it
// returns the metrics the query reads that are not exposed and, when all
// are, what else is wrong (a label they lack, a label value never seen).
func (ex exposed) check(q query, p parsed) (missing, problems []string) {
	labels := map[string]bool{}
	for _, s := range p.selectors {
		series, ok := ex[s.name]
		if !ok {
			missing = append(missing, s.name)
			continue
		}
		for k := range series {
			labels[k] = true
		}
		for _, f := range s.filters {
			values, ok := series[f.Label]
			switch {
			case !ok && !slices.Contains(targetLabels(), f.Label):
				problems = append(problems, fmt.Sprintf("panel %q: query %q matches label %s, which %s does not have", q.panel, q.expr, f.Label, s.name))
			case ok && !f.IsRegexp && !f.IsNegative && !values[f.Value]:
				problems = append(problems, fmt.Sprintf("panel %q: query %q wants %s=%q; %s has %s in %v",
					q.panel, q.expr, f.Label, f.Value, s.name, f.Label, sortedKeys(values)))
			}
		}
	}
	if len(missing) > 0 {
		return missing, problems
	}
	for _, l := range p.by {
		if !labels[l] && !slices.Contains(targetLabels(), l) {
			problems = append(problems, fmt.Sprintf("panel %q: query %q groups by %s, which none of the metrics it reads has", q.panel, q.expr, l))
		}
	}
	return nil, problems
}

// TestDashboardQueriesWhatTheServiceExports parses every query of the
// Grafana dashboard and holds the metrics, labels and label values it reads
// against the /metrics of a running instance: a fresh one (every series of
// a strategy is there from the start; a product's stock once a product is
// seen) and one that has sold.
func TestDashboardQueriesWhatTheServiceExports(t *testing.T) {
	t.Parallel()
	queries := loadDashboard(t)
	in := apptest.Start(t, nil)

	fresh := scrape(t, in.URL)
	var parsedQueries []parsed
	for _, q := range queries {
		p, problems := parseQuery(q)
		parsedQueries = append(parsedQueries, p)
		missing, more := fresh.check(q, p)
		for _, m := range missing {
			if m != "seckill_stock" {
				t.Errorf("panel %q: query %q reads %s, which a fresh instance does not expose", q.panel, q.expr, m)
			}
		}
		for _, pr := range append(problems, more...) {
			t.Error(pr)
		}
	}

	c := &client.Client{BaseURL: in.URL, AdminToken: in.AdminToken}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	prod, err := c.CreateProduct(ctx, "phone", 3)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Buy(ctx, prod.ID, client.Purchase{UserID: "u-1", Quantity: 1}, client.Override{}); err != nil {
		t.Fatal(err)
	}
	sold := scrape(t, in.URL)
	for i, q := range queries {
		missing, problems := sold.check(q, parsedQueries[i])
		for _, m := range missing {
			t.Errorf("panel %q: query %q reads %s, which the instance does not expose", q.panel, q.expr, m)
		}
		for _, pr := range problems {
			t.Error(pr)
		}
	}
	if v := sold["seckill_stock"]["product"]; !v[fmt.Sprint(prod.ID)] {
		t.Errorf("seckill_stock has products %v after a sale of product %d", sortedKeys(v), prod.ID)
	}
	// The build's version and Go release (the instance runs in this binary).
	if info := sold["seckill_build_info"]; len(info["version"]) != 1 || !info["goversion"][runtime.Version()] {
		t.Errorf("seckill_build_info labels %v; want one version and goversion %s", info, runtime.Version())
	}
}

// TestDashboardCheckCatchesUnknownMetrics: the checks above fail a query
// that reads a metric, a label or a label value the service does not have,
// or that PromQL would refuse.
func TestDashboardCheckCatchesUnknownMetrics(t *testing.T) {
	ex := exposed{
		"seckill_purchases_total": {"strategy": {"redlock": true}, "outcome": {"ok": true, "sold_out": true}},
	}
	for _, tc := range []struct {
		expr           string
		missing, fails bool
	}{
		{`sum by (outcome) (rate(seckill_purchases_total[$__rate_interval]))`, false, false},
		{`sum by (instance) (rate(seckill_purchases_total{outcome=~"sold.*"}[1m]))`, false, false},
		{`sum by (outcome) (rate(seckill_purchase_total[1m]))`, true, false},
		{`sum by (result) (rate(seckill_purchases_total[1m]))`, false, true},
		{`rate(seckill_purchases_total{outcome="success"}[1m])`, false, true},
		{`rate(seckill_purchases_total{reason="x"}[1m])`, false, true},
		{`rate(seckill_purchases_total)`, false, true},
		{`sum(rate(seckill_purchases_total[1m])`, false, true},
	} {
		q := query{"test", tc.expr}
		p, problems := parseQuery(q)
		missing, more := ex.check(q, p)
		problems = append(problems, more...)
		if (len(missing) > 0) != tc.missing || (len(problems) > 0) != tc.fails {
			t.Errorf("checks of %q: missing %v, problems %q; want missing %v, failing %v", tc.expr, missing, problems, tc.missing, tc.fails)
		}
	}
}

// TestPrometheusScrapesEveryReplica holds deploy/prometheus.yml against the
// stack: it scrapes each replica's /metrics on its port (the replicas listed
// in its file_sd files, which compose mounts beside it), and the compose file
// runs Prometheus with it and Grafana with the dashboard provisioned.
func TestPrometheusScrapesEveryReplica(t *testing.T) {
	s := loadStack(t)
	conf := readPrometheusConf(t)
	targets, sdFiles := scrapeTargets(t, conf)
	want := replicaTargets(t, s)
	if slices.Sort(targets); !slices.Equal(targets, want) {
		t.Errorf("%s scrapes %q; want every replica, directly: %q", prometheusConf, targets, want)
	}
	wantPrometheusService(t, s, sdFiles)
	wantGrafanaService(t, s)
}

// scrapeTargets returns the targets conf scrapes, static or listed in its
// file_sd files, and those files; it checks that every job scrapes /metrics
// and that each file is a plain name beside conf.
func scrapeTargets(t *testing.T, conf prometheusConfig) (targets, sdFiles []string) {
	t.Helper()
	for _, sc := range conf.ScrapeConfigs {
		if sc.MetricsPath != "" && sc.MetricsPath != "/metrics" {
			t.Errorf("%s: job %s scrapes %s; want /metrics", prometheusConf, sc.JobName, sc.MetricsPath)
		}
		for _, st := range sc.StaticConfigs {
			targets = append(targets, st.Targets...)
		}
		for _, sd := range sc.FileSDConfigs {
			for _, f := range sd.Files {
				if path.IsAbs(f) || strings.ContainsAny(f, "*?[") {
					t.Errorf("%s: file_sd file %q; want a plain name beside %s", prometheusConf, f, prometheusConf)
					continue
				}
				sdFiles = append(sdFiles, f)
				var groups []struct {
					Targets []string `yaml:"targets"`
				}
				readYAML(t, f, &groups)
				for _, g := range groups {
					targets = append(targets, g.Targets...)
				}
			}
		}
	}
	return targets, sdFiles
}

// replicaTargets returns host:port of every replica of the stack, in the
// order of s.app.
func replicaTargets(t *testing.T, s stack) []string {
	t.Helper()
	var want []string
	for _, name := range s.app {
		cfg, _ := programVars(t, env(t, s.Services[name]))
		_, port, err := net.SplitHostPort(cfg.Addr)
		if err != nil {
			t.Fatalf("service %s: SECKILL_ADDR %q: %v", name, cfg.Addr, err)
		}
		want = append(want, net.JoinHostPort(name, port))
	}
	return want
}

// wantPrometheusService checks that the stack runs Prometheus with
// prometheus.yml and its file_sd files (sdFiles) mounted beside it.
func wantPrometheusService(t *testing.T, s stack, sdFiles []string) {
	t.Helper()
	prom, ok := s.Services["prometheus"]
	if !ok || !strings.HasPrefix(prom.Image, "prom/prometheus:") {
		t.Fatalf("no prometheus service running prom/prometheus")
	}
	const promConfDir = "/etc/prometheus"
	wantMount(t, "prometheus", prom, "./deploy/"+prometheusConf, path.Join(promConfDir, "prometheus.yml"))
	for _, f := range sdFiles {
		// Prometheus reads a relative file_sd path from the config's directory.
		wantMount(t, "prometheus", prom, "./deploy/"+f, path.Join(promConfDir, f))
	}
}

// wantGrafanaService checks Grafana: the data source points at the
// prometheus service, the provider's path is where the dashboards are
// mounted, the home dashboard is ours, and it waits for Prometheus.
func wantGrafanaService(t *testing.T, s stack) {
	t.Helper()
	graf, ok := s.Services["grafana"]
	if !ok || !strings.HasPrefix(graf.Image, "grafana/grafana:") {
		t.Fatalf("no grafana service running grafana/grafana")
	}
	wantMount(t, "grafana", graf, "./deploy/grafana/provisioning", "/etc/grafana/provisioning")
	var ds struct {
		Datasources []struct {
			URL string `yaml:"url"`
		} `yaml:"datasources"`
	}
	readYAML(t, grafanaDatasources, &ds)
	if len(ds.Datasources) != 1 || ds.Datasources[0].URL != "http://prometheus:9090" {
		t.Errorf("%s: data sources %+v; want the prometheus service, http://prometheus:9090", grafanaDatasources, ds.Datasources)
	}
	var providers struct {
		Providers []struct {
			Options struct {
				Path string `yaml:"path"`
			} `yaml:"options"`
		} `yaml:"providers"`
	}
	readYAML(t, grafanaProviders, &providers)
	if len(providers.Providers) != 1 {
		t.Fatalf("%s: %d providers; want 1", grafanaProviders, len(providers.Providers))
	}
	dir := providers.Providers[0].Options.Path
	wantMount(t, "grafana", graf, "./deploy/"+path.Dir(dashboardFile), dir)
	if home := env(t, graf)["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]; home != path.Join(dir, path.Base(dashboardFile)) {
		t.Errorf("grafana's home dashboard %q; want %s", home, path.Join(dir, path.Base(dashboardFile)))
	}
	if cond := dependsOn(t, graf)["prometheus"]; cond != "service_healthy" {
		t.Errorf("grafana waits for prometheus with %q; want service_healthy", cond)
	}
}

// prometheusConfig is the part of deploy/prometheus.yml these tests read.
type prometheusConfig struct {
	ScrapeConfigs []struct {
		JobName       string `yaml:"job_name"`
		MetricsPath   string `yaml:"metrics_path"`
		StaticConfigs []struct {
			Targets []string `yaml:"targets"`
		} `yaml:"static_configs"`
		FileSDConfigs []struct {
			Files []string `yaml:"files"`
		} `yaml:"file_sd_configs"`
	} `yaml:"scrape_configs"`
}

func readPrometheusConf(t *testing.T) prometheusConfig {
	t.Helper()
	var conf prometheusConfig
	readYAML(t, prometheusConf, &conf)
	return conf
}

// wantMount wants service to mount the host path from (relative to the
// compose file, which must exist) at to.
func wantMount(t *testing.T, name string, svc service, from, to string) {
	t.Helper()
	for _, v := range svc.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) >= 2 && parts[0] == from && parts[1] == to {
			if _, err := os.Stat(filepath.Join("..", from)); err != nil {
				t.Errorf("service %s mounts %s, which does not exist: %v", name, from, err)
			}
			return
		}
	}
	t.Errorf("service %s volumes %q; want %s mounted at %s", name, svc.Volumes, from, to)
}

// TestComposeStopGraceFitsTheDrain: compose waits longer than the service's
// drain may take before it kills it, and restarts what stops.
func TestComposeStopGraceFitsTheDrain(t *testing.T) {
	s := loadStack(t)
	for _, name := range s.app {
		cfg, _ := programVars(t, env(t, s.Services[name]))
		grace := s.Services[name].StopGracePeriod
		d, err := time.ParseDuration(grace)
		if err != nil {
			t.Errorf("service %s: stop_grace_period %q: %v; want a duration longer than the drain", name, grace, err)
			continue
		}
		if budget := app.DrainBudget(cfg); d <= budget {
			t.Errorf("service %s: stop_grace_period %v; the drain may take %v: want longer", name, d, budget)
		}
	}
	for _, name := range sortedKeys(s.Services) {
		svc := s.Services[name]
		if len(svc.Profiles) > 0 {
			continue
		}
		if !slices.Contains([]string{"always", "unless-stopped", "on-failure"}, svc.Restart) {
			t.Errorf("service %s: restart %q; want a restart policy (unless-stopped)", name, svc.Restart)
		}
	}
}

// TestDashboardUsesKnownVariables: every $variable of a query is one
// fillGrafanaVars fills in (the dashboard defines no template variables).
func TestDashboardUsesKnownVariables(t *testing.T) {
	for _, q := range loadDashboard(t) {
		if v := regexp.MustCompile(`\$\w+`).FindAllString(fillGrafanaVars(q.expr), -1); len(v) > 0 {
			t.Errorf("panel %q: query %q uses %v, which nothing defines", q.panel, q.expr, v)
		}
	}
}
