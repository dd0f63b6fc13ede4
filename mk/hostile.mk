# Hostile run (issue 24), part of make test: for 10 s, on loopback only, malformed datagrams
# (noise, headers over noise, real datagrams cut or altered, 64 KiB datagrams) from 32
# sources at up to 2,000 a second go to the collector beside the real captures replayed in a
# loop; it asserts that every flow of the captures is decoded, that no flow comes out of a
# datagram refused as malformed, that the log stays short and that resident memory stays
# bounded. It needs the shared captures (../shared/testdata, or $FLOWZERO_TESTDATA) and fails
# without them.
#   make hostile                                  the 10 s run
#   make hostile FLOWZERO_HOSTILE_DURATION=2m     a longer one
FLOWZERO_HOSTILE_DURATION ?= 10s

.PHONY: hostile

hostile:
	$(GO) vet -tags hostile ./app/
	FLOWZERO_HOSTILE_DURATION=$(FLOWZERO_HOSTILE_DURATION) \
	  $(GO) test -count=1 -timeout 10m -tags hostile -run '^TestHostile$$' -v ./app/ | grep -E '^(---|ok|FAIL|PASS|panic)|hostile_test.go'

INTEGRATION_TARGETS += hostile
