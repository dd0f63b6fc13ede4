package app

import (
	"net/http"
	"net/netip"
	"path/filepath"

	"flowzero/console"
)

// consoleViewsFile is the name of the saved views file beside the embedded store's data
// directory, when console.views-file is empty.
const consoleViewsFile = "console-views.json"

// consoleConfiguration is the console section with its views file resolved: empty, it is
// console-views.json in the directory holding outputs.store.embedded.path (var/ by default),
// so that the views stay with the flows when the data directory moves.
func (c *Configuration) consoleConfiguration() console.Configuration {
	cc := c.Console
	if cc.ViewsFile == "" {
		cc.ViewsFile = filepath.Join(filepath.Dir(filepath.Clean(c.Outputs.Store.Embedded.Path)), consoleViewsFile)
	}
	return cc
}

// consoleServed says whether the console is mounted: enabled, with an HTTP listener to
// serve it on.
func (c *Configuration) consoleServed() bool {
	return c.Console.Enabled && c.Collector.HTTP.Listen != ""
}

// newConsole reads the saved views (an unreadable file stops New rather than being
// overwritten later) and returns the console, or nil when it is not served.
func (a *App) newConsole() error {
	if !a.cfg.consoleServed() {
		return nil
	}
	c, err := console.New(a.cfg.consoleConfiguration(), console.Dependencies{
		Registry: a.registry,
		Logger:   a.log,
		Clock:    a.clock,
	})
	if err != nil {
		return err
	}
	a.console = c
	return nil
}

// addConsoleHandlers adds the console's pages and API to the collector's handlers.
func (a *App) addConsoleHandlers(handlers map[string]http.Handler) {
	if a.console == nil {
		return
	}
	for pattern, h := range a.console.Handlers() {
		handlers[pattern] = h
	}
}

// ConsoleURL returns the address of the web console once started ("" when it is not
// served). A listener on every address is given as the loopback one, which a browser on the
// same machine opens.
func (a *App) ConsoleURL() string {
	if a.console == nil || a.collector == nil {
		return ""
	}
	addr, err := netip.ParseAddrPort(a.collector.HTTPAddr())
	if err != nil {
		return ""
	}
	host := addr.Addr().Unmap()
	switch {
	case host.IsUnspecified() && host.Is4():
		host = netip.MustParseAddr("127.0.0.1")
	case host.IsUnspecified():
		host = netip.IPv6Loopback()
	}
	return "http://" + netip.AddrPortFrom(host, addr.Port()).String() + "/"
}
