module flowzero

go 1.26

require (
	github.com/gopacket/gopacket v1.7.7
	gopkg.in/yaml.v3 v3.0.1
)

require (
	golang.org/x/net v0.55.0 // indirect
	golang.org/x/sys v0.45.0 // indirect
)
