package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCollectCheckRefuses: `flowzero collect --check` refuses the configurations issue 24
// found accepted, naming the keys: flows stored twice (the store sink and the Kafka table
// reading the kafka output's topic), and listeners that share a port, whatever their
// protocols and however the address is written.
func TestCollectCheckRefuses(t *testing.T) {
	for _, c := range []struct {
		name, doc string
		want      []string
	}{
		{"stored twice", "outputs:\n  kafka: {enabled: true}\n  store:\n    enabled: true\n    kafka: {enabled: true}\n",
			[]string{"outputs.store.kafka.enabled: ", "outputs.store.enabled", "outputs.kafka.enabled", "stored twice"}},
		{"netflow and sflow on one port", "collector:\n  listeners:\n    - {protocol: netflow, address: ':2055'}\n    - {protocol: sflow, address: ':2055'}\n",
			[]string{`collector.listeners[1].address: ":2055" takes port 2055 of listeners[0].address (netflow ":2055")`}},
		{"any address and loopback", "collector:\n  listeners:\n    - {protocol: netflow, address: '0.0.0.0:2055'}\n    - {protocol: netflow, address: '127.0.0.1:2055'}\n",
			[]string{`collector.listeners[1].address: "127.0.0.1:2055" takes port 2055 of listeners[0].address`}},
		{"dual stack and IPv4", "collector:\n  listeners:\n    - {protocol: sflow, address: '127.0.0.1:6343'}\n    - {protocol: netflow, address: '[::]:6343'}\n",
			[]string{`collector.listeners[1].address: "[::]:6343" takes port 6343 of listeners[0].address (sflow "127.0.0.1:6343")`}},
		{"empty host and IPv4", "collector:\n  listeners:\n    - {protocol: sflow, address: '127.0.0.1:6343'}\n    - {protocol: netflow, address: ':6343'}\n",
			[]string{`collector.listeners[1].address: ":6343" takes port 6343 of listeners[0].address (sflow "127.0.0.1:6343")`}},
		{"af-packet on every address", "collector:\n  listeners:\n    - {protocol: netflow, address: '0.0.0.0:2055', receive: af-packet, interface: eth0}\n",
			[]string{`collector.listeners[0].address: "0.0.0.0:2055": receive: af-packet needs the address the exporters send to`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "collector.yaml")
			os.WriteFile(path, []byte(c.doc), 0o644)
			var out, errb bytes.Buffer
			code := run([]string{"collect", "--check", "--config", path}, &out, &errb)
			if code == 0 || strings.Contains(out.String(), "configuration OK") {
				t.Fatalf("--check accepted it: code %d, %q", code, out.String())
			}
			for _, w := range c.want {
				if !strings.Contains(errb.String(), w) {
					t.Errorf("error %q lacks %q", errb.String(), w)
				}
			}
		})
	}
	// What stays valid: the two ways to the store alone, and listeners on distinct ports or
	// on distinct addresses of one port.
	for _, doc := range []string{
		"outputs:\n  kafka: {enabled: true}\n  store:\n    kafka: {enabled: true}\n",
		"outputs:\n  store:\n    enabled: true\n    kafka: {enabled: true}\n",
		"outputs:\n  kafka: {enabled: true}\n  store: {enabled: true}\n",
		"collector:\n  listeners:\n    - {protocol: netflow, address: '127.0.0.1:2055'}\n    - {protocol: sflow, address: '127.0.0.2:2055'}\n    - {protocol: sflow, address: '[::1]:2055'}\n",
		// 0.0.0.0 binds IPv4 only, ::1 IPv6 only.
		"collector:\n  listeners:\n    - {protocol: netflow, address: '0.0.0.0:2055'}\n    - {protocol: sflow, address: '[::1]:2055'}\n",
	} {
		path := filepath.Join(t.TempDir(), "collector.yaml")
		os.WriteFile(path, []byte(doc), 0o644)
		var out, errb bytes.Buffer
		if code := run([]string{"collect", "--check", "--config", path}, &out, &errb); code != 0 {
			t.Errorf("%q refused: %s", doc, errb.String())
		}
	}
}
