package app

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"flowzero/internal/config"
)

// TestConsoleMounted: the console answers on the collector's listener beside the API, its
// user is the default one, and a saved view lands in console-views.json beside the
// embedded store's data directory.
func TestConsoleMounted(t *testing.T) {
	cfg := testConfig(t)
	dir := t.TempDir()
	cfg.Outputs.Store.Embedded.Path = filepath.Join(dir, "data", "chdb")
	a, err := New(cfg, testDeps())
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	url := a.ConsoleURL()
	if want := "http://" + a.Collector().HTTPAddr() + "/"; url != want {
		t.Fatalf("ConsoleURL() = %q, want %q", url, want)
	}

	get := func(path string) (*http.Response, string) {
		t.Helper()
		resp, err := http.Get(url + strings.TrimPrefix(path, "/"))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp, string(body)
	}
	// The console's own routes get its page (the built front end, or the page saying how to
	// build it); the collector's routes keep theirs.
	for _, path := range []string{"/", "/visualize"} {
		resp, body := get(path)
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") || !strings.Contains(body, "flowzero") {
			t.Errorf("GET %s: %s %s, want the console's HTML page", path, resp.Status, resp.Header.Get("Content-Type"))
		}
	}
	if resp, body := get("/healthz"); resp.StatusCode != http.StatusOK || !strings.Contains(body, `"components"`) {
		t.Errorf("GET /healthz: %s %q: the console took the collector's route", resp.Status, body)
	}
	if resp, body := get("/api/v0/exporters"); resp.StatusCode != http.StatusOK || !strings.Contains(body, `"exporters"`) {
		t.Errorf("GET /api/v0/exporters: %s %q", resp.Status, body)
	}
	resp, body := get("/api/v0/console/user")
	var user struct{ Login, Name string }
	if err := json.Unmarshal([]byte(body), &user); err != nil || resp.StatusCode != http.StatusOK || user.Login != "default" || user.Name != "Default User" {
		t.Fatalf("GET /api/v0/console/user: %s %s, want the default user", resp.Status, body)
	}

	req, _ := http.NewRequest("POST", url+"api/v0/console/views", strings.NewReader(`{"name": "Transit", "state": {"version": 1, "graph": "sankey", "dimensions": ["SrcAS", "InIfProvider"]}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Flowzero-Request", "1")
	created, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	created.Body.Close()
	if created.StatusCode != http.StatusCreated {
		t.Fatalf("POST /api/v0/console/views: %s", created.Status)
	}
	saved, err := os.ReadFile(filepath.Join(dir, "data", "console-views.json"))
	if err != nil {
		t.Fatalf("the views file is not beside the store's data directory: %v", err)
	}
	if !strings.Contains(string(saved), `"Transit"`) || !strings.Contains(string(saved), `"owner": "default"`) {
		t.Errorf("views file %s, want the view Transit of default", saved)
	}
}

// TestConsoleDisabled: console.enabled false leaves "/" to nobody, and there is no URL to
// print; without an HTTP listener there is no console either.
func TestConsoleDisabled(t *testing.T) {
	cfg := testConfig(t)
	cfg.Console.Enabled = false
	a, err := New(cfg, testDeps())
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	if u := a.ConsoleURL(); u != "" {
		t.Errorf("ConsoleURL() = %q with the console disabled", u)
	}
	resp, err := http.Get("http://" + a.Collector().HTTPAddr() + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET / with the console disabled: %s, want 404", resp.Status)
	}

	cfg = testConfig(t)
	cfg.Collector.HTTP.Listen = ""
	if a, err = New(cfg, testDeps()); err != nil {
		t.Fatal(err)
	}
	if a.console != nil {
		t.Error("console built without an HTTP listener to serve it")
	}
}

// TestConsoleConfiguration: the views file follows the store's data directory unless
// given; errors name the key under console; an unreadable views file stops New.
func TestConsoleConfiguration(t *testing.T) {
	cfg := DefaultConfiguration()
	if got := cfg.consoleConfiguration().ViewsFile; got != filepath.Join("var", "console-views.json") {
		t.Errorf("default views file %q, want var/console-views.json", got)
	}
	cfg.Outputs.Store.Embedded.Path = "/srv/flowzero/chdb/"
	if got := cfg.consoleConfiguration().ViewsFile; got != "/srv/flowzero/console-views.json" {
		t.Errorf("views file %q for the store in /srv/flowzero/chdb/", got)
	}
	cfg.Console.ViewsFile = "/etc/flowzero/views.json"
	if got := cfg.consoleConfiguration().ViewsFile; got != "/etc/flowzero/views.json" {
		t.Errorf("views file %q, want the one configured", got)
	}

	cfg = DefaultConfiguration()
	cfg.Console.Auth.Headers.Login = "Remote User"
	err := cfg.Validate()
	var ke *config.KeyError
	if !errors.As(err, &ke) || ke.Key != "console.auth.headers.login" {
		t.Errorf("Validate() = %v, want an error naming console.auth.headers.login", err)
	}

	cfg = testConfig(t)
	bad := filepath.Join(t.TempDir(), "views.json")
	if err := os.WriteFile(bad, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg.Console.ViewsFile = bad
	if _, err := New(cfg, testDeps()); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("New with a views file that is not JSON: %v, want an error naming the file", err)
	}
}

// TestRunConfiguration: the file of make run loads, stores flows in the embedded engine
// and serves the console on loopback.
func TestRunConfiguration(t *testing.T) {
	cfg, err := Load("../demo/collect.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Outputs.Store.Enabled || !cfg.consoleServed() || cfg.Collector.HTTP.Listen != "127.0.0.1:8080" {
		t.Errorf("make run's configuration: store %v, console served %v on %q; want the store and the console on 127.0.0.1:8080",
			cfg.Outputs.Store.Enabled, cfg.consoleServed(), cfg.Collector.HTTP.Listen)
	}
}
