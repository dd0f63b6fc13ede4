package kafkatest

import "testing"

func TestBrokersFromEnvironment(t *testing.T) {
	t.Setenv(EnvBrokers, " 127.0.0.1:1 , 127.0.0.1:2,")
	got := Brokers(t)
	if len(got) != 2 || got[0] != "127.0.0.1:1" || got[1] != "127.0.0.1:2" {
		t.Fatalf("Brokers = %q", got)
	}
	t.Setenv("CI", "")
	t.Setenv("FLOWZERO_REQUIRE_SERVICES", "1")
	if !Required() {
		t.Fatal("FLOWZERO_REQUIRE_SERVICES=1 must make services required")
	}
	t.Setenv("FLOWZERO_REQUIRE_SERVICES", "")
	if Required() {
		t.Fatal("services required with neither CI nor FLOWZERO_REQUIRE_SERVICES")
	}
}
