// Package e2e holds the end-to-end test of the web console (issue 23): a collector with the
// demo exporters and the embedded store, driven by a real Chromium through the DevTools
// protocol (chromedp). Every page is opened, the charts' data are read from the page and
// compared with the API's answers, the browser's console must stay free of errors, and a
// screenshot of each page is written under var/console-e2e/ (var/console-perf/ for
// TestConsolePerformance).
//
// The test needs the embedded engine and the built console: `make console-e2e` (part of
// `make test`'s integration phase) builds both and runs it with the tags chdb and
// integration. It skips, saying so, when no Chromium is found (FLOWZERO_CHROMIUM names one;
// `make deps` installs Debian's chromium as root), and fails instead where real services are
// required (CI=true or FLOWZERO_REQUIRE_SERVICES=1). With FLOWZERO_CONSOLE_BENCH naming a
// store built by `make bench-query`, TestConsolePerformance measures Home and Visualize on it.
package e2e
