package deploy_test

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"gopkg.in/yaml.v3"

	"github.com/seckill/seckill/config"
	seckill "github.com/seckill/seckill/service"
)

// The files under test, relative to this package's directory.
const (
	composeFile    = "../docker-compose.yml"
	dockerfile     = "../Dockerfile"
	dockerignore   = "../.dockerignore"
	nginxConf      = "nginx.conf"
	goModFile      = "../go.mod"
	nginxConfMount = "./deploy/nginx.conf"
	// nginxTemplates is where the official nginx image looks for templates
	// (*.conf.template), which it fills in from its environment.
	nginxTemplates = "/etc/nginx/templates/"
)

// compose is the part of a compose file these tests read.
type compose struct {
	Services map[string]service `yaml:"services"`
}

type service struct {
	Image       string      `yaml:"image"`
	Build       any         `yaml:"build"`
	Command     any         `yaml:"command"`
	Entrypoint  any         `yaml:"entrypoint"`
	Environment any         `yaml:"environment"` // a map or a list of KEY=VALUE
	DependsOn   any         `yaml:"depends_on"`  // a list or a map of conditions
	Healthcheck healthcheck `yaml:"healthcheck"`
	Profiles    []string    `yaml:"profiles"`
	Ports       []string    `yaml:"ports"`
	Volumes     []string    `yaml:"volumes"`
	Restart     string      `yaml:"restart"`
	// StopGracePeriod is how long compose waits after SIGTERM before it
	// kills the container (10s when unset).
	StopGracePeriod string `yaml:"stop_grace_period"`
	Deploy          struct {
		Replicas *int `yaml:"replicas"`
	} `yaml:"deploy"`
}

type healthcheck struct {
	Test    any  `yaml:"test"`
	Disable bool `yaml:"disable"`
}

// stack is the compose file with the roles of its services worked out.
type stack struct {
	compose
	app   []string // services that run the seckill service
	redis []string // services that run redis-server
}

func loadStack(t *testing.T) stack {
	t.Helper()
	b, err := os.ReadFile(composeFile)
	if err != nil {
		t.Fatal(err)
	}
	var c compose
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatalf("parse %s: %v", composeFile, err)
	}
	s := stack{compose: c}
	for _, name := range sortedKeys(c.Services) {
		svc := c.Services[name]
		if _, ok := env(t, svc)["SECKILL_MYSQL_DSN"]; ok && len(svc.Profiles) == 0 {
			s.app = append(s.app, name)
		}
		if strings.HasPrefix(svc.Image, "redis:") {
			s.redis = append(s.redis, name)
		}
	}
	if len(s.app) == 0 {
		t.Fatalf("%s: no service sets SECKILL_MYSQL_DSN", composeFile)
	}
	return s
}

// programVars returns config.Load's reading of env (after compose's
// ${NAME:-default} interpolation) and the names of every variable it asked
// for: the variables the program reads.
func programVars(t *testing.T, env map[string]string) (config.Config, map[string]bool) {
	t.Helper()
	asked := map[string]bool{}
	cfg, err := config.Load(func(name string) string {
		asked[name] = true
		return interpolate(env[name])
	}, false)
	if err != nil {
		t.Fatalf("config.Load(compose environment) = %v; want the program to accept it", err)
	}
	return cfg, asked
}

// TestComposeEnvironmentIsWhatTheProgramReads holds every SECKILL_* variable
// the stack sets against the variables config.Load reads, and the values
// against what it accepts.
func TestComposeEnvironmentIsWhatTheProgramReads(t *testing.T) {
	s := loadStack(t)
	var token string
	for _, name := range s.app {
		e := env(t, s.Services[name])
		cfg, asked := programVars(t, e)
		for k := range e {
			if strings.HasPrefix(k, "SECKILL_") && !asked[k] {
				t.Errorf("service %s sets %s, which the program does not read", name, k)
			}
		}
		for _, k := range []string{"SECKILL_ADDR", "SECKILL_MYSQL_DSN", "SECKILL_REDIS_ADDRS", "SECKILL_ADMIN_TOKEN"} {
			if interpolate(e[k]) == "" {
				t.Errorf("service %s: %s is empty; the stack must set it", name, k)
			}
		}
		host, _, err := net.SplitHostPort(cfg.Addr)
		if err != nil || (host != "0.0.0.0" && host != "") {
			t.Errorf("service %s: SECKILL_ADDR %q; want 0.0.0.0:port (reachable from other containers)", name, cfg.Addr)
		}
		switch {
		case token == "":
			token = cfg.AdminToken
		case cfg.AdminToken != token:
			t.Errorf("service %s: SECKILL_ADMIN_TOKEN %q; want the same token on every replica (%q)", name, cfg.AdminToken, token)
		}
	}
}

// TestComposeReplicas wants two replicas of the service.
func TestComposeReplicas(t *testing.T) {
	s := loadStack(t)
	n := 0
	for _, name := range s.app {
		if r := s.Services[name].Deploy.Replicas; r != nil {
			n += *r
		} else {
			n++
		}
	}
	if n != 2 {
		t.Errorf("services %q run %d replicas of the service; want 2", s.app, n)
	}
}

// TestComposeRedisNodes wants exactly three independent Redis nodes, named
// by the service's SECKILL_REDIS_ADDRS with their port.
func TestComposeRedisNodes(t *testing.T) {
	s := loadStack(t)
	if len(s.redis) != 3 {
		t.Fatalf("redis services %q; want exactly 3", s.redis)
	}
	var want []string
	for _, name := range s.redis {
		args := strings.Join(words(s.Services[name].Command), " ")
		for _, bad := range []string{"replicaof", "slaveof", "--cluster-enabled yes", "sentinel"} {
			if strings.Contains(strings.ToLower(args), bad) {
				t.Errorf("redis service %s runs %q: the nodes must be independent masters (no %s)", name, args, bad)
			}
		}
		if s.Services[name].Deploy.Replicas != nil {
			t.Errorf("redis service %s has deploy.replicas; want one node per service", name)
		}
		want = append(want, net.JoinHostPort(name, redisPort(args)))
	}
	for _, name := range s.app {
		cfg, _ := programVars(t, env(t, s.Services[name]))
		got := slices.Sorted(slices.Values(cfg.RedisAddrs))
		if !slices.Equal(got, want) {
			t.Errorf("service %s: SECKILL_REDIS_ADDRS names %q; want the redis services %q", name, got, want)
		}
	}
}

// TestComposeMySQL wants the service's DSN to name the mysql service with
// its root password.
func TestComposeMySQL(t *testing.T) {
	s := loadStack(t)
	for _, name := range s.app {
		cfg, _ := programVars(t, env(t, s.Services[name]))
		dsn, err := mysql.ParseDSN(cfg.MySQLDSN)
		if err != nil {
			t.Fatalf("service %s: SECKILL_MYSQL_DSN: %v", name, err)
		}
		host, port, err := net.SplitHostPort(dsn.Addr)
		if err != nil {
			t.Fatalf("service %s: SECKILL_MYSQL_DSN address %q: %v", name, dsn.Addr, err)
		}
		db, ok := s.Services[host]
		if !ok || !strings.HasPrefix(db.Image, "mysql:") {
			t.Errorf("service %s: SECKILL_MYSQL_DSN names host %q; want a mysql service", name, host)
			continue
		}
		if port != "3306" {
			t.Errorf("service %s: SECKILL_MYSQL_DSN port %s; want 3306", name, port)
		}
		if pw := env(t, db)["MYSQL_ROOT_PASSWORD"]; dsn.User != "root" || dsn.Passwd != pw {
			t.Errorf("service %s: SECKILL_MYSQL_DSN user %q password %q; want root and %s's MYSQL_ROOT_PASSWORD %q",
				name, dsn.User, dsn.Passwd, host, pw)
		}
	}
}

// TestComposeHealthchecks wants every depends_on to wait for a health check
// that exists, and the service's health check to ask its own port.
func TestComposeHealthchecks(t *testing.T) {
	s := loadStack(t)
	for _, name := range sortedKeys(s.Services) {
		for dep, cond := range dependsOn(t, s.Services[name]) {
			target, ok := s.Services[dep]
			switch {
			case !ok:
				t.Errorf("service %s depends on %s, which is not a service", name, dep)
			case cond != "service_healthy":
				t.Errorf("service %s depends on %s with condition %q; want service_healthy", name, dep, cond)
			case target.Healthcheck.Test == nil || target.Healthcheck.Disable:
				t.Errorf("service %s waits for %s to be healthy, which has no healthcheck", name, dep)
			}
		}
	}
	for _, name := range s.app {
		cfg, _ := programVars(t, env(t, s.Services[name]))
		_, port, _ := net.SplitHostPort(cfg.Addr)
		test := strings.Join(words(s.Services[name].Healthcheck.Test), " ")
		if !strings.Contains(test, "127.0.0.1:"+port+"/readyz") && !strings.Contains(test, "127.0.0.1:"+port+"/healthz") {
			t.Errorf("service %s healthcheck %q; want it to ask /readyz or /healthz on port %s", name, test, port)
		}
	}
}

// TestComposeNginx holds nginx.conf, filled in from the nginx service's
// environment, against the stack: its upstream names the replicas and their
// port, it listens where compose publishes, and compose mounts it where the
// image fills templates in.
func TestComposeNginx(t *testing.T) {
	s := loadStack(t)
	conf := nginx(t, s)
	var servers []string
	for _, name := range s.app {
		cfg, _ := programVars(t, env(t, s.Services[name]))
		_, port, _ := net.SplitHostPort(cfg.Addr)
		servers = append(servers, net.JoinHostPort(name, port))
	}
	if len(conf.proxyPass) == 0 {
		t.Fatalf("%s: no proxy_pass", nginxConf)
	}
	for _, pass := range conf.proxyPass {
		up, ok := conf.upstreams[strings.TrimPrefix(pass, "http://")]
		if !ok {
			t.Errorf("%s: proxy_pass %s names no upstream (upstreams: %v)", nginxConf, pass, conf.upstreams)
			continue
		}
		if got := slices.Sorted(slices.Values(up)); !slices.Equal(got, servers) {
			t.Errorf("%s: upstream of proxy_pass %s has servers %q; want the replicas %q", nginxConf, pass, got, servers)
		}
	}

	svc, ok := s.Services["nginx"]
	if !ok {
		t.Fatal("no nginx service")
	}
	mounted := false
	for _, v := range svc.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) >= 2 && parts[0] == nginxConfMount &&
			strings.HasPrefix(parts[1], nginxTemplates) && strings.HasSuffix(parts[1], ".conf.template") {
			mounted = true
		}
	}
	if !mounted {
		t.Errorf("nginx volumes %q; want %s mounted as a template, %s*.conf.template", svc.Volumes, nginxConfMount, nginxTemplates)
	}
	for _, p := range svc.Ports {
		if target := p[strings.LastIndex(p, ":")+1:]; !slices.Contains(conf.listen, target) {
			t.Errorf("nginx publishes %q but listens on %q", p, conf.listen)
		}
	}
	for _, dep := range s.app {
		if _, ok := dependsOn(t, svc)[dep]; !ok {
			t.Errorf("nginx does not wait for replica %s", dep)
		}
	}
}

// TestNginxWaitsForTheLongestPurchase: nginx waits for an answer at least
// as long as the longest purchase the replicas allow (service.PurchaseBudget
// with compose's settings: the lock wait, hold_ms, pause_ms and the database
// calls), so that it never answers 504 for a purchase that then succeeds.
func TestNginxWaitsForTheLongestPurchase(t *testing.T) {
	s := loadStack(t)
	var budget time.Duration
	for _, name := range s.app {
		cfg, _ := programVars(t, env(t, s.Services[name]))
		budget = max(budget, seckill.PurchaseBudget(cfg.LockWait, 0))
	}
	for _, p := range nginxWaitProblems(nginx(t, s), budget) {
		t.Errorf("%s: %s", nginxConf, p)
	}

	// The check itself fails the timeouts nginx had before (30s), and
	// timeouts left unset.
	for _, tc := range []struct {
		conf  string
		fails bool
	}{
		{"proxy_read_timeout 60s;\nproxy_send_timeout 1m;", false},
		{"proxy_read_timeout 90;\nproxy_send_timeout 60s;", false},
		{"proxy_read_timeout 30s;\nproxy_send_timeout 30s;", true},
		{"proxy_read_timeout 60s;\nproxy_send_timeout 30s;", true},
		{"proxy_send_timeout 60s;", true},
	} {
		if got := nginxWaitProblems(parseNginx(tc.conf), 37*time.Second); (len(got) > 0) != tc.fails {
			t.Errorf("nginxWaitProblems(%q, 37s) = %q; want failing %v", tc.conf, got, tc.fails)
		}
	}
}

// nginxWaitProblems says which of nginx's waits for the upstream is unset
// or shorter than budget.
func nginxWaitProblems(conf nginxConfig, budget time.Duration) []string {
	var problems []string
	for _, name := range []string{"proxy_read_timeout", "proxy_send_timeout"} {
		values := conf.directives[name]
		if len(values) == 0 {
			problems = append(problems, fmt.Sprintf("no %s; want one of at least %v, the longest purchase", name, budget))
		}
		for _, v := range values {
			d, err := nginxDuration(v)
			switch {
			case err != nil:
				problems = append(problems, fmt.Sprintf("%s %s: %v", name, v, err))
			case d < budget:
				problems = append(problems, fmt.Sprintf("%s %s; a purchase may take %v: want at least that", name, v, budget))
			}
		}
	}
	return problems
}

// nginxDuration parses an nginx time ("60", "60s", "1m 30s", "500ms").
func nginxDuration(v string) (time.Duration, error) {
	v = strings.ReplaceAll(v, " ", "")
	if _, err := strconv.Atoi(v); err == nil {
		v += "s"
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("parse nginx time %q: %w", v, err)
	}
	return d, nil
}

// TestComposeLoadtest wants the load driver behind the loadtest profile,
// pointed at the stack, with the replicas' admin token.
func TestComposeLoadtest(t *testing.T) {
	s := loadStack(t)
	lt, ok := s.Services["loadtest"]
	if !ok {
		t.Fatal("no loadtest service")
	}
	if !slices.Equal(lt.Profiles, []string{"loadtest"}) {
		t.Errorf("loadtest profiles %q; want [loadtest]", lt.Profiles)
	}
	if got := words(lt.Entrypoint); !slices.Equal(got, []string{"loadtest"}) {
		t.Errorf("loadtest entrypoint %q; want [loadtest]", got)
	}
	flags := map[string]string{}
	for _, w := range words(lt.Command) {
		k, v, _ := strings.Cut(strings.TrimLeft(w, "-"), "=")
		flags[k] = interpolate(v)
	}
	cfg, _ := programVars(t, env(t, s.Services[s.app[0]]))
	if flags["admin-token"] != cfg.AdminToken {
		t.Errorf("loadtest -admin-token %q; want the replicas' SECKILL_ADMIN_TOKEN %q", flags["admin-token"], cfg.AdminToken)
	}
	conf := nginx(t, s)
	var targets []string
	for _, name := range s.app {
		_, port, _ := net.SplitHostPort(cfg.Addr)
		targets = append(targets, "http://"+net.JoinHostPort(name, port))
	}
	for _, port := range conf.listen {
		targets = append(targets, "http://nginx:"+port)
		if port == "80" {
			targets = append(targets, "http://nginx")
		}
	}
	urls := strings.Split(flags["url"], ",")
	for _, u := range urls {
		if !slices.Contains(targets, strings.TrimSuffix(u, "/")) {
			t.Errorf("loadtest -url %q; want nginx or the replicas (%q)", u, targets)
		}
		host := strings.Split(strings.TrimPrefix(u, "http://"), ":")[0]
		if _, ok := dependsOn(t, lt)[strings.TrimSuffix(host, "/")]; !ok {
			t.Errorf("loadtest does not wait for %s, which -url names", host)
		}
	}
	if !sameBuild(lt, s.Services[s.app[0]]) {
		t.Errorf("loadtest image %q build %v; want the service's image and build", lt.Image, lt.Build)
	}
}

// TestDockerfile wants a multi-stage build from the module root: a golang
// builder of the go.mod version named build, static binaries of the service
// and the load driver, and a small runtime stage that runs as a non-root
// user.
func TestDockerfile(t *testing.T) {
	lines := dockerLines(t)
	var stages [][]string // each stage's instructions, FROM first
	for _, l := range lines {
		if strings.HasPrefix(strings.ToUpper(l), "FROM ") {
			stages = append(stages, nil)
		}
		if len(stages) == 0 {
			if !strings.HasPrefix(strings.ToUpper(l), "ARG ") {
				t.Fatalf("%s: %q before the first FROM", dockerfile, l)
			}
			continue
		}
		stages[len(stages)-1] = append(stages[len(stages)-1], l)
	}
	if len(stages) < 2 {
		t.Fatalf("%s has %d stages; want a builder and a runtime stage", dockerfile, len(stages))
	}

	from := regexp.MustCompile(`(?i)^FROM\s+golang:(\d+\.\d+)\S*\s+AS\s+build$`)
	m := from.FindStringSubmatch(stages[0][0])
	if m == nil {
		t.Fatalf("%s: first stage %q; want FROM golang:<version> AS build", dockerfile, stages[0][0])
	}
	if want := goVersion(t); m[1] != want {
		t.Errorf("%s builds with Go %s; go.mod says go %s", dockerfile, m[1], want)
	}
	build := strings.Join(stages[0], "\n")
	for _, want := range []string{"CGO_ENABLED=0", "COPY go.mod go.sum ./", "COPY . .", "-o /seckill .", "-o /loadtest ./loadtest"} {
		// A whole word: "-o /seckill ./cmd" does not build the module root.
		if !regexp.MustCompile(`(^|\s)` + regexp.QuoteMeta(want) + `(\s|$)`).MatchString(build) {
			t.Errorf("%s build stage lacks %q", dockerfile, want)
		}
	}

	final := stages[len(stages)-1]
	if strings.Contains(strings.ToLower(final[0]), "golang") {
		t.Errorf("%s: runtime stage %q; want a small image, not the Go toolchain", dockerfile, final[0])
	}
	var user, entry string
	copied := false
	for _, l := range final {
		switch f := strings.Fields(l); strings.ToUpper(f[0]) {
		case "USER":
			user = f[1]
		case "ENTRYPOINT":
			entry = l
		case "COPY":
			copied = copied || (strings.Contains(l, "--from=build") && strings.Contains(l, "/seckill") && strings.Contains(l, "/loadtest"))
		}
	}
	if u := strings.Split(user, ":")[0]; u == "" || u == "root" || u == "0" {
		t.Errorf("%s: runtime USER %q; want a non-root user", dockerfile, user)
	}
	if !copied {
		t.Errorf("%s: runtime stage does not COPY --from=build both /seckill and /loadtest", dockerfile)
	}
	if !strings.Contains(entry, "seckill") {
		t.Errorf("%s: ENTRYPOINT %q; want the service", dockerfile, entry)
	}

	// The compose file builds it from the module root.
	s := loadStack(t)
	for _, name := range append(slices.Clone(s.app), "loadtest") {
		ctx, file := buildOf(s.Services[name].Build)
		if ctx != "." || (file != "" && file != "Dockerfile") {
			t.Errorf("service %s builds context %q file %q; want context . and the Dockerfile", name, ctx, file)
		}
	}
}

// TestDockerignoreKeepsSources wants the build context to keep what go build
// needs.
func TestDockerignoreKeepsSources(t *testing.T) {
	b, err := os.ReadFile(dockerignore)
	if err != nil {
		t.Fatal(err)
	}
	for l := range strings.Lines(string(b)) {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") || strings.HasPrefix(l, "!") {
			continue
		}
		for _, keep := range []string{"go.mod", "go.sum", "main.go", "loadtest/main.go", "store/store.go"} {
			if excludes(l, keep) {
				t.Errorf("%s: %q excludes %s, which the build needs", dockerignore, l, keep)
			}
		}
	}
}

// env returns a service's environment as a map.
func env(t *testing.T, s service) map[string]string {
	t.Helper()
	out := map[string]string{}
	switch e := s.Environment.(type) {
	case nil:
	case map[string]any:
		for k, v := range e {
			out[k] = fmt.Sprint(v)
		}
	case []any:
		for _, kv := range e {
			k, v, _ := strings.Cut(fmt.Sprint(kv), "=")
			out[k] = v
		}
	default:
		t.Fatalf("environment of type %T", e)
	}
	return out
}

// dependsOn returns a service's dependencies and their conditions (short
// list form: service_started).
func dependsOn(t *testing.T, s service) map[string]string {
	t.Helper()
	out := map[string]string{}
	switch d := s.DependsOn.(type) {
	case nil:
	case []any:
		for _, name := range d {
			out[fmt.Sprint(name)] = "service_started"
		}
	case map[string]any:
		for name, v := range d {
			cond := "service_started"
			if m, ok := v.(map[string]any); ok && m["condition"] != nil {
				cond = fmt.Sprint(m["condition"])
			}
			out[name] = cond
		}
	default:
		t.Fatalf("depends_on of type %T", d)
	}
	return out
}

// words returns a command, entrypoint or healthcheck test as a list.
func words(v any) []string {
	switch v := v.(type) {
	case string:
		return strings.Fields(v)
	case []any:
		out := make([]string, len(v))
		for i, w := range v {
			out[i] = fmt.Sprint(w)
		}
		return out
	}
	return nil
}

func buildOf(v any) (context, file string) {
	switch b := v.(type) {
	case string:
		return b, ""
	case map[string]any:
		c, _ := b["context"].(string)
		f, _ := b["dockerfile"].(string)
		return c, f
	}
	return "", ""
}

func sameBuild(a, b service) bool {
	ac, af := buildOf(a.Build)
	bc, bf := buildOf(b.Build)
	return a.Image == b.Image && ac == bc && af == bf
}

// redisPort returns the port redis-server listens on given its arguments.
func redisPort(args string) string {
	f := strings.Fields(args)
	for i, w := range f {
		if w == "--port" && i+1 < len(f) {
			return f[i+1]
		}
	}
	return "6379"
}

var interpolation = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}`)

// interpolate expands compose's ${NAME} and ${NAME:-default} as an empty
// shell would: to the default.
func interpolate(s string) string {
	s = interpolation.ReplaceAllString(s, "$2")
	return strings.ReplaceAll(s, "$$", "$")
}

type nginxConfig struct {
	upstreams map[string][]string
	proxyPass []string
	listen    []string
	// directives are the values of every simple directive (listen and
	// proxy_pass among them), by name, in the order they come
	// (proxy_read_timeout: ["60s"]).
	directives map[string][]string
}

// nginx reads the upstream blocks, proxy_pass targets, listen ports and
// simple directives of nginx.conf as the nginx service runs it: filled in
// from its environment.
func nginx(t *testing.T, s stack) nginxConfig {
	t.Helper()
	svc, ok := s.Services["nginx"]
	if !ok {
		t.Fatal("no nginx service")
	}
	return parseNginx(fillTemplate(t, nginxConf, env(t, svc)))
}

// templateVar is a variable the nginx image's envsubst fills in.
var templateVar = regexp.MustCompile(`\$\{(\w+)\}`)

// fillTemplate reads a template and fills in its ${NAME}s from env, as the
// official nginx image does (after compose's interpolation of env); a
// ${NAME} that env does not set fails t, since nginx would get it as is.
func fillTemplate(t *testing.T, file string, env map[string]string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return templateVar.ReplaceAllStringFunc(string(b), func(v string) string {
		name := templateVar.FindStringSubmatch(v)[1]
		value, ok := env[name]
		if !ok {
			t.Errorf("%s uses %s, which the nginx service's environment does not set", file, v)
			return v
		}
		return interpolate(value)
	})
}

// parseNginx reads the upstream blocks, proxy_pass targets, listen ports
// and simple directives of an nginx configuration.
func parseNginx(conf string) nginxConfig {
	var text strings.Builder
	for l := range strings.Lines(conf) {
		l, _, _ = strings.Cut(l, "#")
		text.WriteString(l)
	}
	c := nginxConfig{upstreams: map[string][]string{}, directives: map[string][]string{}}
	upstream := regexp.MustCompile(`upstream\s+(\S+)\s*\{([^}]*)\}`)
	server := regexp.MustCompile(`(?m)^\s*server\s+(\S+?)(?:\s[^;]*)?;`)
	for _, m := range upstream.FindAllStringSubmatch(text.String(), -1) {
		for _, s := range server.FindAllStringSubmatch(m[2], -1) {
			c.upstreams[m[1]] = append(c.upstreams[m[1]], s[1])
		}
	}
	for _, m := range regexp.MustCompile(`proxy_pass\s+([^;\s]+)\s*;`).FindAllStringSubmatch(text.String(), -1) {
		c.proxyPass = append(c.proxyPass, m[1])
	}
	for _, m := range regexp.MustCompile(`listen\s+(?:\S*:)?(\d+)[^;]*;`).FindAllStringSubmatch(text.String(), -1) {
		c.listen = append(c.listen, m[1])
	}
	for _, m := range regexp.MustCompile(`(?m)^\s*(\w+)\s+([^;{}]*);`).FindAllStringSubmatch(text.String(), -1) {
		c.directives[m[1]] = append(c.directives[m[1]], strings.TrimSpace(m[2]))
	}
	return c
}

// dockerLines returns the Dockerfile's instructions, continuation lines
// joined and comments left out.
func dockerLines(t *testing.T) []string {
	t.Helper()
	f, err := os.Open(dockerfile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	var cur strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(l, "#") || (l == "" && cur.Len() == 0) {
			continue
		}
		if rest, ok := strings.CutSuffix(l, "\\"); ok {
			cur.WriteString(rest + " ")
			continue
		}
		cur.WriteString(l)
		lines = append(lines, strings.Join(strings.Fields(cur.String()), " "))
		cur.Reset()
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}

// goVersion returns the major.minor of go.mod's go directive.
func goVersion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(goModFile)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go\s+(\d+\.\d+)`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("%s has no go directive", goModFile)
	}
	return string(bytes.TrimSpace(m[1]))
}

// excludes reports whether a .dockerignore pattern leaves file out of the
// build context: the pattern matches the file or a directory above it, where
// * and ? stay within a path element and ** spans any number of them.
func excludes(pattern, file string) bool {
	pattern = strings.Trim(pattern, "/")
	var re strings.Builder
	re.WriteString("^")
	for i := 0; i < len(pattern); i++ {
		switch c := pattern[i]; {
		case strings.HasPrefix(pattern[i:], "**/"):
			re.WriteString("(.*/)?")
			i += 2
		case strings.HasPrefix(pattern[i:], "**"):
			re.WriteString(".*")
			i++
		case c == '*':
			re.WriteString("[^/]*")
		case c == '?':
			re.WriteString("[^/]")
		default:
			re.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	re.WriteString("(/.*)?$")
	return regexp.MustCompile(re.String()).MatchString(file)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
