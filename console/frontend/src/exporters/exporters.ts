// What the Exporters page reads from GET /api/v0/exporters (collector/http.go, with the
// decoders' details: decoder/netflow/details.go, decoder/sflow/details.go).
import type { ExporterStatus } from "@/api/types";

// protocols names what an exporter sends: NetFlow v5/v9, IPFIX (version 10), sFlow v5.
export function protocols(e: ExporterStatus): string[] {
  const out = new Set<string>();
  for (const s of e.decoder?.netflow ?? []) {
    for (const d of s.domains ?? []) out.add(d.version === 10 ? "IPFIX" : `NetFlow v${d.version}`);
    if (!s.domains?.length) out.add("NetFlow");
  }
  if (e.decoder?.sflow?.length) out.add("sFlow v5");
  return [...out].sort();
}

// samplingRates lists the distinct rates learned (options records, sFlow data sources), or
// the last rate seen on a flow.
export function samplingRates(e: ExporterStatus): string {
  const rates = new Set<number>();
  for (const s of e.decoder?.netflow ?? []) for (const d of s.domains ?? []) for (const r of d["sampling-rates"] ?? []) rates.add(r.rate);
  for (const a of e.decoder?.sflow ?? []) for (const sub of a["sub-agents"] ?? []) for (const ds of sub["data-sources"] ?? []) rates.add(ds["sampling-rate"]);
  if (rates.size === 0 && e["last-sampling-rate"]) rates.add(e["last-sampling-rate"]);
  if (rates.size === 0) return "–";
  return [...rates]
    .sort((a, b) => a - b)
    .map((r) => `1:${r}`)
    .join(", ");
}

// templateCount counts the NetFlow v9/IPFIX templates (data and options) held.
export function templateCount(e: ExporterStatus): string {
  let data = 0;
  let options = 0;
  for (const s of e.decoder?.netflow ?? [])
    for (const d of s.domains ?? [])
      for (const t of d.templates ?? []) {
        if (t.kind === "options") options++;
        else data++;
      }
  if (data + options === 0) return e.decoder?.netflow ? "0" : "–";
  return options ? `${data} + ${options} opt.` : String(data);
}

// flowRates gives each exporter's flows per second: the counter's change since the previous
// answer, or its average since first seen on the first answer (and after a restart, when the
// counter went back).
export function flowRates(
  exporters: ExporterStatus[],
  previous: { at: number; exporters: ExporterStatus[] } | null,
  at: number,
): Map<string, number> {
  const before = new Map((previous?.exporters ?? []).map((e) => [e.address, e.flows]));
  const out = new Map<string, number>();
  for (const e of exporters) {
    const prev = before.get(e.address);
    const seconds = previous ? (at - previous.at) / 1000 : 0;
    if (prev !== undefined && seconds > 0 && e.flows >= prev) {
      out.set(e.address, (e.flows - prev) / seconds);
      continue;
    }
    const span = (Date.parse(e["last-packet"]) - Date.parse(e["first-seen"])) / 1000;
    if (span > 0) out.set(e.address, e.flows / span);
  }
  return out;
}
