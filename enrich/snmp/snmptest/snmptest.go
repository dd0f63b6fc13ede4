// Package snmptest starts a real SNMP agent for tests: Debian's snmpd (net-snmp), in the
// foreground on a free loopback port, with a configuration the test chooses (a SNMPv2c
// community, SNMPv3 users, the sysName) and a pass-through script serving exact ifAlias and
// ifHighSpeed values (and ifName values when given). Every other object is the agent's own:
// the machine's real interfaces.
//
// A test is skipped when snmpd is not installed (`apt install snmpd`), and fails instead
// under CI=true or FLOWZERO_REQUIRE_SERVICES=1, so that the integration path cannot silently
// not run in CI.
package snmptest

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gosnmp/gosnmp"

	"flowzero/internal/lockedbuf"
	"flowzero/internal/testutil"
)

// Binary is where Debian installs snmpd.
const Binary = "/usr/sbin/snmpd"

// User is an SNMPv3 user of the agent.
type User struct {
	Name string
	// AuthProtocol is MD5, SHA, SHA-224, SHA-256, SHA-384 or SHA-512 (net-snmp's names).
	AuthProtocol, AuthPassphrase string
	// PrivProtocol is DES or AES (empty: authNoPriv).
	PrivProtocol, PrivPassphrase string
}

// Options configure the agent.
type Options struct {
	// Community is the read-only SNMPv2c community ("" for none).
	Community string
	Users     []User
	// SysName is the agent's sysName.
	SysName string
	// Aliases and Speeds are the ifAlias and ifHighSpeed (Mbit/s) of interfaces by ifIndex;
	// other interfaces have neither.
	Aliases map[uint32]string
	Speeds  map[uint32]uint32
	// Names, when not empty, are the ifName of interfaces by ifIndex, in place of the
	// machine's: interfaces the machine does not have (those of a flow capture) can be named.
	// The agent then has no other ifName.
	Names map[uint32]string
}

// Agent is a running snmpd.
type Agent struct {
	// Addr is the agent's UDP address.
	Addr *net.UDPAddr
	cmd  *exec.Cmd
	out  *lockedbuf.Buffer
	mu   sync.Mutex
	stop bool
}

// Required reports whether real services are mandatory (CI=true or
// FLOWZERO_REQUIRE_SERVICES=1): a test that cannot run one fails instead of skipping.
func Required() bool {
	return os.Getenv("CI") == "true" || os.Getenv("FLOWZERO_REQUIRE_SERVICES") == "1"
}

// Start starts an agent and waits until it answers; it is killed at the end of the test.
func Start(t testing.TB, opts Options) *Agent {
	t.Helper()
	if _, err := os.Stat(Binary); err != nil {
		msg := fmt.Sprintf("%s not found (apt install snmpd): the real SNMP agent tests cannot run", Binary)
		if Required() {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "pass.sh")
	if err := os.WriteFile(script, passScript(opts), 0o755); err != nil {
		t.Fatal(err)
	}
	var lastErr error
	for range 5 {
		port, err := freeUDPPort()
		if err != nil {
			t.Fatal(err)
		}
		a, err := start(t, dir, script, port, opts)
		if err == nil {
			return a
		}
		lastErr = err // most likely the port was taken meanwhile
	}
	t.Fatalf("snmpd did not start: %v", lastErr)
	return nil
}

func start(t testing.TB, dir, script string, port int, opts Options) (*Agent, error) {
	var conf strings.Builder
	fmt.Fprintf(&conf, "agentAddress udp:127.0.0.1:%d\n", port)
	if opts.Community != "" {
		fmt.Fprintf(&conf, "rocommunity %s 127.0.0.1\n", opts.Community)
	}
	for _, u := range opts.Users {
		level := "noauth"
		line := "createUser " + u.Name
		if u.AuthProtocol != "" {
			level = "auth"
			line += fmt.Sprintf(" %s %q", u.AuthProtocol, u.AuthPassphrase)
			if u.PrivProtocol != "" {
				level = "priv"
				line += fmt.Sprintf(" %s %q", u.PrivProtocol, u.PrivPassphrase)
			}
		}
		fmt.Fprintf(&conf, "%s\nrouser %s %s\n", line, u.Name, level)
	}
	if opts.SysName != "" {
		fmt.Fprintf(&conf, "sysName %s\n", opts.SysName)
	}
	fmt.Fprintf(&conf, "pass .1.3.6.1.2.1.31.1.1.1.18 %s\npass .1.3.6.1.2.1.31.1.1.1.15 %s\n", script, script)
	if len(opts.Names) > 0 {
		fmt.Fprintf(&conf, "pass .1.3.6.1.2.1.31.1.1.1.1 %s\n", script)
	}
	confPath := filepath.Join(dir, fmt.Sprintf("snmpd-%d.conf", port))
	if err := os.WriteFile(confPath, []byte(conf.String()), 0o600); err != nil {
		return nil, err
	}
	state := filepath.Join(dir, fmt.Sprintf("state-%d", port))
	if err := os.MkdirAll(state, 0o700); err != nil {
		return nil, err
	}
	// -f: foreground, -Lo: log to stdout, -C: only this configuration file.
	cmd := exec.Command(Binary, "-f", "-Lo", "-C", "-c", confPath, "-p", filepath.Join(dir, "snmpd.pid"))
	out := &lockedbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	// The users snmpd creates go to its persistent directory, which must not be the
	// system's; no MIB files are needed (numeric OIDs).
	cmd.Env = append(os.Environ(), "SNMP_PERSISTENT_DIR="+state, "MIBS=", "MIBDIRS="+filepath.Join(dir, "no-mibs"))
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	a := &Agent{Addr: &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port}, cmd: cmd, out: out}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		a.kill()
		<-exited
		if t.Failed() {
			t.Logf("snmpd output:\n%s", out.String())
		}
	})
	// Ready once it answers (about a second), or failed when it exits first.
	deadline := time.Now().Add(testutil.WaitTimeout)
	for {
		select {
		case err := <-exited:
			exited <- err
			return nil, fmt.Errorf("snmpd exited (%v): %s", err, out.String())
		default:
		}
		if a.answers(opts) {
			return a, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("snmpd not answering after %s: %s", testutil.WaitTimeout, out.String())
		}
	}
}

// answers tries one GET of sysName.0 (it waits up to 200 ms for the answer).
func (a *Agent) answers(opts Options) bool {
	g := &gosnmp.GoSNMP{Target: "127.0.0.1", Port: uint16(a.Addr.Port), Timeout: 200 * time.Millisecond, Version: gosnmp.Version2c, Community: opts.Community}
	if opts.Community == "" && len(opts.Users) > 0 {
		u := opts.Users[0]
		g.Version, g.SecurityModel, g.MsgFlags = gosnmp.Version3, gosnmp.UserSecurityModel, gosnmp.NoAuthNoPriv
		sp := &gosnmp.UsmSecurityParameters{UserName: u.Name, AuthenticationProtocol: gosnmp.NoAuth, PrivacyProtocol: gosnmp.NoPriv}
		if u.AuthProtocol != "" {
			g.MsgFlags = gosnmp.AuthNoPriv
			sp.AuthenticationProtocol, sp.AuthenticationPassphrase = authProtocol(u.AuthProtocol), u.AuthPassphrase
			if u.PrivProtocol != "" {
				g.MsgFlags = gosnmp.AuthPriv
				sp.PrivacyProtocol, sp.PrivacyPassphrase = privProtocol(u.PrivProtocol), u.PrivPassphrase
			}
		}
		g.SecurityParameters = sp
	}
	if err := g.Connect(); err != nil {
		return false
	}
	defer g.Conn.Close()
	pkt, err := g.Get([]string{".1.3.6.1.2.1.1.5.0"})
	return err == nil && pkt.Error == gosnmp.NoError
}

func authProtocol(s string) gosnmp.SnmpV3AuthProtocol {
	switch strings.ToUpper(strings.ReplaceAll(s, "-", "")) {
	case "MD5":
		return gosnmp.MD5
	case "SHA224":
		return gosnmp.SHA224
	case "SHA256":
		return gosnmp.SHA256
	case "SHA384":
		return gosnmp.SHA384
	case "SHA512":
		return gosnmp.SHA512
	}
	return gosnmp.SHA
}

func privProtocol(s string) gosnmp.SnmpV3PrivProtocol {
	if strings.ToUpper(s) == "DES" {
		return gosnmp.DES
	}
	return gosnmp.AES
}

// Pause stops the agent's process (SIGSTOP): requests are not answered, as with a router
// whose agent hangs or whose packets are filtered.
func (a *Agent) Pause(t testing.TB) {
	t.Helper()
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
}

// Resume lets a paused agent run again (SIGCONT); it answers requests received meanwhile.
func (a *Agent) Resume(t testing.TB) {
	t.Helper()
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
}

// Stop kills the agent.
func (a *Agent) Stop() { a.kill() }

func (a *Agent) kill() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stop {
		return
	}
	a.stop = true
	a.cmd.Process.Signal(syscall.SIGCONT)
	a.cmd.Process.Kill()
}

// passScript is a net-snmp pass-through program (snmpd.conf(5), "pass") answering GET
// requests for the configured ifAlias, ifHighSpeed and ifName values.
func passScript(opts Options) []byte {
	var b bytes.Buffer
	b.WriteString("#!/bin/sh\n[ \"$1\" = -g ] || exit 0\ncase \"$2\" in\n")
	for _, index := range sortedKeys(opts.Aliases) {
		fmt.Fprintf(&b, ".1.3.6.1.2.1.31.1.1.1.18.%d) printf '%%s\\nstring\\n%%s\\n' \"$2\" %s ;;\n", index, shellQuote(opts.Aliases[index]))
	}
	for _, index := range sortedKeys(opts.Speeds) {
		fmt.Fprintf(&b, ".1.3.6.1.2.1.31.1.1.1.15.%d) printf '%%s\\ngauge\\n%d\\n' \"$2\" ;;\n", index, opts.Speeds[index])
	}
	for _, index := range sortedKeys(opts.Names) {
		fmt.Fprintf(&b, ".1.3.6.1.2.1.31.1.1.1.1.%d) printf '%%s\\nstring\\n%%s\\n' \"$2\" %s ;;\n", index, shellQuote(opts.Names[index]))
	}
	b.WriteString("esac\n")
	return b.Bytes()
}

func sortedKeys[V any](m map[uint32]V) []uint32 {
	keys := make([]uint32, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	return keys
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func freeUDPPort() (int, error) {
	c, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port, nil
}

// Interfaces returns the machine's network interfaces as the agent sees them: ifIndex to
// name, from /sys/class/net.
func Interfaces(t testing.TB) map[uint32]string {
	t.Helper()
	entries, err := os.ReadDir("/sys/class/net")
	if err != nil {
		t.Skipf("cannot list the machine's interfaces: %v", err)
	}
	out := map[uint32]string{}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join("/sys/class/net", e.Name(), "ifindex"))
		if err != nil {
			continue
		}
		var index uint32
		if _, err := fmt.Sscan(string(data), &index); err == nil {
			out[index] = e.Name()
		}
	}
	if len(out) == 0 {
		t.Skip("no interface in /sys/class/net")
	}
	return out
}
