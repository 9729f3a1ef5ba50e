package docs_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"gopkg.in/yaml.v3"

	"github.com/seckill/seckill/docs"
	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/testkit/apptest"
)

// TestEveryRouteIsDocumented: the router's routes and the document's
// operations are the same set, so that a route added to one and not the
// other fails here (and the tour, which calls every operation, covers
// every route).
func TestEveryRouteIsDocumented(t *testing.T) {
	in := apptest.Open(t, nil)
	srv := app.NewServer(t.Context(), in.Config, in.Stores, slog.New(slog.NewTextHandler(io.Discard, nil)), app.Options{})
	t.Cleanup(func() { srv.Close() })
	engine, ok := srv.HTTP.Handler.(*gin.Engine)
	if !ok {
		t.Fatalf("the server's handler is a %T; want the gin engine", srv.HTTP.Handler)
	}
	// :name and *name are the document's {name}.
	param := regexp.MustCompile(`[:*]([a-z_]+)`)
	var routes []string
	for _, r := range engine.Routes() {
		routes = append(routes, r.Method+" "+param.ReplaceAllString(r.Path, "{$1}"))
	}
	var doc struct {
		Paths map[string]map[string]any `yaml:"paths"`
	}
	if err := yaml.Unmarshal(docs.OpenAPIYAML(), &doc); err != nil {
		t.Fatal(err)
	}
	var documented []string
	for path, item := range doc.Paths {
		for method := range item {
			if method != "parameters" && method != "summary" && method != "description" {
				documented = append(documented, strings.ToUpper(method)+" "+path)
			}
		}
	}
	// The catch-all of the profiles serves their index too, which the
	// document names as a path of its own.
	for _, r := range routes {
		if method, ok := strings.CutSuffix(r, " /debug/pprof/{profile}"); ok {
			routes = append(routes, method+" /debug/pprof/")
		}
	}
	slices.Sort(routes)
	slices.Sort(documented)
	if !slices.Equal(routes, documented) {
		t.Errorf("routes:\n  %s\nthe document's operations:\n  %s", strings.Join(routes, "\n  "), strings.Join(documented, "\n  "))
	}
}

// TestJSONIsTheYAML: the document served in JSON is the one written in
// YAML, value for value, its keys in the written order.
func TestJSONIsTheYAML(t *testing.T) {
	j, err := docs.OpenAPIJSON()
	if err != nil {
		t.Fatal(err)
	}
	var fromJSON, fromYAML any
	if err := json.Unmarshal(j, &fromJSON); err != nil {
		t.Fatalf("the JSON does not parse: %v", err)
	}
	if err := yaml.Unmarshal(docs.OpenAPIYAML(), &fromYAML); err != nil {
		t.Fatal(err)
	}
	// YAML's integers are ints; JSON's numbers float64.
	normal, err := json.Marshal(fromYAML)
	if err != nil {
		t.Fatal(err)
	}
	var fromYAMLViaJSON any
	if err := json.Unmarshal(normal, &fromYAMLViaJSON); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(fromJSON, fromYAMLViaJSON) {
		t.Error("the JSON document differs from the YAML one")
	}
	if !bytes.HasPrefix(j, []byte("{\n  \"openapi\": \"3.1.0\",\n  \"info\": {")) {
		t.Errorf("the JSON begins %.60q; want openapi, then info, as written", j)
	}
}
