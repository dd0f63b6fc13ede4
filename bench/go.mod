module flowzero/bench

go 1.26.0

replace flowzero => ../

require (
	flowzero v0.0.0-00010101000000-000000000000
	github.com/VictoriaMetrics/easyproto v1.1.3
	github.com/netsampler/goflow2/v2 v2.2.6
	github.com/planetscale/vtprotobuf v0.6.0
	github.com/vmihailenco/msgpack/v5 v5.4.1
	google.golang.org/protobuf v1.36.12
)

require (
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/gaissmai/bart v0.30.0 // indirect
	github.com/gopacket/gopacket v1.7.7 // indirect
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/osrg/gobgp/v4 v4.8.0 // indirect
	github.com/prometheus/client_golang v1.25.0 // indirect
	github.com/prometheus/client_model v0.6.3 // indirect
	github.com/prometheus/common v0.72.0 // indirect
	github.com/prometheus/procfs v0.22.0 // indirect
	github.com/vmihailenco/tagparser/v2 v2.0.0 // indirect
	golang.org/x/net v0.59.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)
