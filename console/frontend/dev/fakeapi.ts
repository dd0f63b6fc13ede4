// A stand-in for the collector's API (docs/api.md) for the development servers only (npm
// run dev / preview without FLOWZERO_API): deterministic traffic with a daily shape, the
// real /api/v0/exporters answer of `flowzero collect --demo` (fixtures/exporters.json) with
// its times moved to now, a small filter checker and completer, saved views in memory. It is
// not part of the build, and not a test double: the Go tests and the browser tests of the
// console run against the real collector.
import type { Connect, Plugin } from "vite";
import type { IncomingMessage, ServerResponse } from "node:http";
import exportersFixture from "./fixtures/exporters.json" with { type: "json" };

type Json = Record<string, unknown>;

// ---------------------------------------------------------------- columns and values
interface FakeColumn {
  name: string;
  type: string;
  kind: string;
  dimension?: boolean;
  aggregated?: boolean;
  truncatable?: boolean;
  values?: string[];
}

const enumBoundary = ["undefined", "external", "internal"];
const columns: FakeColumn[] = [
  { name: "TimeReceived", type: "DateTime", kind: "time", dimension: false, aggregated: true },
  { name: "SamplingRate", type: "UInt64", kind: "number", aggregated: true },
  { name: "ExporterAddress", type: "IPv6", kind: "address", aggregated: true },
  { name: "ExporterName", type: "LowCardinality(String)", kind: "string", aggregated: true },
  { name: "ExporterGroup", type: "LowCardinality(String)", kind: "string", aggregated: true },
  { name: "ExporterRole", type: "LowCardinality(String)", kind: "string", aggregated: true },
  { name: "ExporterSite", type: "LowCardinality(String)", kind: "string", aggregated: true },
  { name: "ExporterRegion", type: "LowCardinality(String)", kind: "string", aggregated: true },
  { name: "SrcAddr", type: "IPv6", kind: "address", truncatable: true },
  { name: "DstAddr", type: "IPv6", kind: "address", truncatable: true },
  { name: "SrcNetPrefix", type: "String", kind: "string" },
  { name: "DstNetPrefix", type: "String", kind: "string" },
  { name: "SrcAS", type: "UInt32", kind: "as", aggregated: true },
  { name: "DstAS", type: "UInt32", kind: "as", aggregated: true },
  { name: "SrcNetName", type: "LowCardinality(String)", kind: "string", aggregated: true },
  { name: "DstNetName", type: "LowCardinality(String)", kind: "string", aggregated: true },
  { name: "SrcCountry", type: "FixedString(2)", kind: "string", aggregated: true },
  { name: "DstCountry", type: "FixedString(2)", kind: "string", aggregated: true },
  { name: "DstASPath", type: "Array(UInt32)", kind: "aspath", dimension: false },
  { name: "Dst1stAS", type: "UInt32", kind: "as", aggregated: true },
  { name: "InIf", type: "UInt32", kind: "number" },
  { name: "OutIf", type: "UInt32", kind: "number" },
  { name: "InIfName", type: "LowCardinality(String)", kind: "string", aggregated: true },
  { name: "OutIfName", type: "LowCardinality(String)", kind: "string", aggregated: true },
  { name: "InIfDescription", type: "LowCardinality(String)", kind: "string", aggregated: true },
  { name: "OutIfDescription", type: "LowCardinality(String)", kind: "string", aggregated: true },
  { name: "InIfSpeed", type: "UInt32", kind: "number", aggregated: true },
  { name: "OutIfSpeed", type: "UInt32", kind: "number", aggregated: true },
  { name: "InIfConnectivity", type: "LowCardinality(String)", kind: "string", aggregated: true },
  { name: "OutIfConnectivity", type: "LowCardinality(String)", kind: "string", aggregated: true },
  { name: "InIfProvider", type: "LowCardinality(String)", kind: "string", aggregated: true },
  { name: "OutIfProvider", type: "LowCardinality(String)", kind: "string", aggregated: true },
  { name: "InIfBoundary", type: "Enum8", kind: "enum", aggregated: true, values: enumBoundary },
  { name: "OutIfBoundary", type: "Enum8", kind: "enum", aggregated: true, values: enumBoundary },
  { name: "EType", type: "UInt32", kind: "etype", aggregated: true, values: ["IPv4", "IPv6"] },
  { name: "Proto", type: "UInt32", kind: "protocol", aggregated: true },
  { name: "SrcPort", type: "UInt16", kind: "port" },
  { name: "DstPort", type: "UInt16", kind: "port" },
  { name: "ForwardingStatus", type: "UInt32", kind: "number", aggregated: true },
  { name: "FlowDirection", type: "Enum8", kind: "enum", aggregated: true, values: ["undefined", "ingress", "egress"] },
  { name: "PacketSizeBucket", type: "LowCardinality(String)", kind: "string" },
  { name: "Bytes", type: "UInt64", kind: "number", dimension: false, aggregated: true },
  { name: "Packets", type: "UInt64", kind: "number", dimension: false, aggregated: true },
];

const exporters: [string, string][] = [
  ["192.0.2.1", "edge1.par1"],
  ["192.0.2.2", "edge2.par1"],
  ["198.51.100.1", "edge1.ams1"],
  ["198.51.100.7", "core1.ams1"],
  ["203.0.113.1", "edge1.fra1"],
];

// Values of each dimension, most frequent first.
const universe: Record<string, string[]> = {
  ExporterAddress: exporters.map(([a]) => a),
  ExporterName: exporters.map(([, n]) => n),
  ExporterGroup: ["paris", "amsterdam", "frankfurt"],
  ExporterRole: ["edge", "core"],
  ExporterSite: ["par1", "ams1", "fra1"],
  ExporterRegion: ["europe"],
  SrcAS: ["AS15169", "AS13335", "AS2906", "AS16509", "AS32934", "AS8075", "AS20940", "AS714", "AS46489", "AS3356", "AS6939", "AS54113"],
  DstAS: ["AS64500", "AS64501", "AS64502", "AS64510", "AS64511", "AS64520", "AS64530", "AS65001", "AS65002", "AS65010"],
  Dst1stAS: ["AS64500", "AS174", "AS3356", "AS1299", "AS6939"],
  SrcNetName: ["google", "cloudflare", "netflix", "amazon", "facebook", "microsoft", "akamai", "apple"],
  DstNetName: ["customers", "hosting", "office", "dmz"],
  SrcCountry: ["US", "FR", "NL", "DE", "IE", "GB", "SE", "JP"],
  DstCountry: ["FR", "BE", "CH", "DE", "ES"],
  InIfName: ["et-0/0/0", "et-0/0/1", "et-0/0/2", "xe-1/0/0", "xe-1/0/1", "ae1", "ae2"],
  OutIfName: ["ae10", "ae11", "ae12", "et-0/0/4", "xe-1/0/3"],
  InIfDescription: ["transit: Cogent", "transit: Lumen", "ix: France-IX", "pni: Google", "pni: Netflix", "ix: AMS-IX", "customer: ACME"],
  OutIfDescription: ["customer: ACME", "customer: Globex", "core: core1.ams1", "customer: Initech", "hosting: rack 12"],
  InIfSpeed: ["100000", "10000", "400000"],
  OutIfSpeed: ["100000", "10000"],
  InIfConnectivity: ["transit", "pni", "ix", "customer"],
  OutIfConnectivity: ["customer", "core", "hosting"],
  InIfProvider: ["cogent", "lumen", "google", "netflix", "franceix", "amsix"],
  OutIfProvider: ["acme", "globex", "initech"],
  InIfBoundary: ["external", "internal"],
  OutIfBoundary: ["internal", "external"],
  EType: ["IPv4", "IPv6"],
  Proto: ["TCP", "UDP", "ICMP", "GRE", "ESP", "IPv6-ICMP"],
  SrcPort: ["443", "80", "53", "1935", "3478", "123", "8443", "22"],
  DstPort: ["443", "80", "53", "123", "25", "993", "22", "3389"],
  ForwardingStatus: ["64", "128", "130"],
  FlowDirection: ["ingress", "egress"],
  PacketSizeBucket: ["1280-1500", "64-127", "512-767", "0-63", "1024-1279"],
  SrcNetPrefix: ["142.250.0.0/15", "104.16.0.0/13", "45.57.0.0/17", "52.84.0.0/15"],
  DstNetPrefix: ["192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24"],
  InIf: ["1", "2", "3", "10", "11"],
  OutIf: ["20", "21", "22", "30"],
  SamplingRate: ["1000", "2000", "100"],
};

function addresses(base: string[], truncate: number): string[] {
  // Host addresses, or their prefix once truncated.
  return base.map((a) => {
    if (truncate >= 32) return a;
    const parts = a.split(".").map(Number);
    const ip = ((parts[0] << 24) | (parts[1] << 16) | (parts[2] << 8) | parts[3]) >>> 0;
    const mask = truncate === 0 ? 0 : (0xffffffff << (32 - truncate)) >>> 0;
    const net = (ip & mask) >>> 0;
    return `${net >>> 24}.${(net >>> 16) & 255}.${(net >>> 8) & 255}.${net & 255}/${truncate}`;
  });
}
const srcHosts = ["142.250.179.78", "104.16.132.229", "45.57.40.1", "52.84.150.34", "157.240.21.35", "13.107.42.14", "23.45.67.89", "17.253.144.10"];
const dstHosts = ["192.0.2.10", "192.0.2.25", "198.51.100.33", "203.0.113.80", "192.0.2.200", "198.51.100.4"];

function valuesOf(dim: string, t4: number): string[] {
  if (dim === "SrcAddr") return [...new Set(addresses(srcHosts, t4))];
  if (dim === "DstAddr") return [...new Set(addresses(dstHosts, t4))];
  return universe[dim] ?? ["value-a", "value-b", "value-c"];
}

// ---------------------------------------------------------------- deterministic traffic
function hash(s: string): number {
  let h = 2166136261;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 16777619);
  }
  return (h >>> 0) / 4294967296;
}

// shape is the traffic at t relative to its daily average: low at 5:00, high at 21:00 UTC.
function shape(t: number): number {
  const hour = (t / 3600000) % 24;
  return 1 + 0.55 * Math.cos(((hour - 21) / 24) * 2 * Math.PI) + 0.06 * Math.sin(t / 1.7e6);
}

const totalBps = 42e9; // daily average of the whole network, L3
function unitScale(units: string): number {
  switch (units) {
    case "l2bps":
      return 1.035;
    case "pps":
      return 1 / (8 * 880);
    case "fps":
      return 1 / (8 * 880 * 1000 * 9);
    case "inl2%":
    case "outl2%":
      return 100 / 1.2e12;
    default:
      return 1;
  }
}

function filterFactor(filter: string): number {
  const f = filter.replace(/\s+/g, " ").trim();
  if (!f) return 1;
  if (/^InIfBoundary = external$/i.test(f)) return 0.82;
  return 0.15 + 0.6 * hash(f);
}

interface Series {
  row: string[];
  weight: number;
}

// seriesOf lists the combinations of the dimensions' values with their share of traffic.
function seriesOf(dims: string[], t4: number): Series[] {
  if (dims.length === 0) return [{ row: [], weight: 1 }];
  // An exporter's address and name go together.
  const a = dims.indexOf("ExporterAddress");
  const n = dims.indexOf("ExporterName");
  if (a >= 0 && n >= 0) {
    const rest = seriesOf(dims.filter((d) => d !== "ExporterName"), t4);
    const at = n < a ? a - 1 : a; // the address's index once the name is left out
    return rest.map((s) => {
      const row = [...s.row];
      row.splice(n, 0, exporters.find(([addr]) => addr === s.row[at])?.[1] ?? "");
      return { row, weight: s.weight };
    });
  }
  let combos: Series[] = [{ row: [], weight: 1 }];
  for (const d of dims) {
    const vals = valuesOf(d, t4).slice(0, dims.length > 2 ? 6 : 12);
    // Zipf-like shares, slightly shuffled per dimension.
    const w = vals.map((v, i) => (1 / Math.pow(i + 1, 1.7)) * (0.8 + 0.4 * hash(d + v)));
    const sum = w.reduce((a, b) => a + b, 0);
    const next: Series[] = [];
    for (const c of combos) vals.forEach((v, i) => next.push({ row: [...c.row, v], weight: (c.weight * w[i]) / sum }));
    combos = next;
  }
  // Combinations are not independent in real traffic: skew them.
  for (const c of combos) c.weight *= 0.5 + hash(c.row.join("|"));
  const sum = combos.reduce((a, c) => a + c.weight, 0);
  for (const c of combos) c.weight /= sum;
  return combos.sort((a, b) => b.weight - a.weight);
}

function pick(body: Json) {
  return {
    start: Date.parse(String(body.start)),
    end: Date.parse(String(body.end)),
    dims: (body.dimensions as string[]) ?? [],
    limit: Number(body.limit ?? 10),
    units: String(body.units ?? "l3bps"),
    filter: String(body.filter ?? ""),
    t4: Number(body.truncate4 ?? 32),
    t6: Number(body.truncate6 ?? 128),
    topBy: String(body.topBy ?? "avg"),
  };
}

const resolutions = [60, 300, 3600];

function chooseTable(start: number, end: number, points: number, dims: string[], filter: string) {
  const target = (end - start) / 1000 / points;
  const rawOnly = dims.some((d) => !columns.find((c) => c.name === d)?.aggregated) || /Addr|Port/.test(filter);
  if (rawOnly) return { table: "flows", interval: Math.max(1, Math.floor(target)) };
  let res = 60;
  for (const r of resolutions) if (r <= target) res = r;
  return { table: `flows_${res === 3600 ? "1h" : res === 300 ? "5m" : "1m"}`, interval: Math.max(res, Math.floor(target / res) * res) };
}

function fakeSQL(kind: string, table: string, q: ReturnType<typeof pick>, interval?: number): string {
  const dims = q.dims.length ? q.dims.join(", ") : "'Total'";
  const where = q.filter ? ` AND (${q.filter.replace(/--.*$/gm, "").replace(/\s+/g, " ").trim()})` : "";
  const value = q.units === "pps" ? "SUM(Packets*SamplingRate)" : q.units === "fps" ? "COUNT(*)" : "SUM(Bytes*SamplingRate*8)";
  return (
    `WITH rows AS (SELECT ${dims} FROM ${table} WHERE TimeReceived BETWEEN toDateTime('${new Date(q.start).toISOString().slice(0, 19)}', 'UTC') AND toDateTime('${new Date(q.end).toISOString().slice(0, 19)}', 'UTC')${where} GROUP BY ${dims} ORDER BY ${value} DESC LIMIT ${q.limit}) ` +
    `SELECT ${interval ? `toStartOfInterval(TimeReceived, INTERVAL ${interval} second) AS time, ` : ""}if((${dims}) IN rows, [${dims}], ['Other']) AS dimensions, ${value}/${interval ?? "range"} AS xps ` +
    `FROM ${table} WHERE TimeReceived BETWEEN ... ${where} GROUP BY ${interval ? "time, " : ""}dimensions ORDER BY ${interval ? "time" : "xps DESC"} -- ${kind}`
  );
}

function percentile(values: number[], p: number): number {
  const s = [...values].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? 0;
}

function reverseDim(d: string): string {
  for (const [a, b] of [["Src", "Dst"], ["Dst", "Src"], ["In", "Out"], ["Out", "In"]]) {
    if (d.startsWith(a) && columns.some((c) => c.name === b + d.slice(a.length))) return b + d.slice(a.length);
  }
  return d;
}

function line(body: Json) {
  const q = pick(body);
  const points = Number(body.points ?? 200);
  const { table, interval } = chooseTable(q.start, q.end, points, q.dims, q.filter);
  const step = interval * 1000;
  const t: number[] = [];
  for (let x = Math.floor(q.start / step) * step; x < q.end; x += step) t.push(x);
  const scale = totalBps * unitScale(q.units) * filterFactor(q.filter);
  const out = {
    table,
    interval,
    sql: fakeSQL("line", table, q, interval),
    t: t.map((x) => new Date(x).toISOString()),
    rows: [] as string[][],
    axis: [] as number[],
    points: [] as number[][],
    min: [] as number[],
    max: [] as number[],
    avg: [] as number[],
    p95: [] as number[],
    last: [] as number[],
    total: [] as number[],
    axisNames: { "1": "Direct" } as Record<string, string>,
  };
  const add = (row: string[], axis: number, weight: number, seed: string, offset = 0) => {
    const pts = t.map((x) => {
      const noise = 0.9 + 0.2 * hash(`${seed}@${Math.floor((x + offset) / step)}`);
      return Math.max(0, scale * weight * shape(x + offset) * noise);
    });
    out.rows.push(row);
    out.axis.push(axis);
    out.points.push(pts);
    out.min.push(Math.min(...pts));
    out.max.push(Math.max(...pts));
    const avg = pts.reduce((a, b) => a + b, 0) / (pts.length || 1);
    out.avg.push(avg);
    out.p95.push(percentile(pts, 95));
    out.last.push(pts[pts.length - 1] ?? 0);
    const seconds = (q.end - q.start) / 1000;
    out.total.push(q.units.endsWith("%") ? avg : q.units.endsWith("bps") ? (avg * seconds) / 8 : avg * seconds);
  };
  const emit = (dims: string[], axis: number, factor: number) => {
    const series = seriesOf(dims, q.t4);
    const top = series.slice(0, q.limit);
    for (const s of top) add(s.row, axis, s.weight * factor, s.row.join("|") + axis);
    const rest = series.slice(q.limit).reduce((a, s) => a + s.weight, 0);
    if (rest > 0.0001 && dims.length) add(dims.map(() => "Other"), axis, rest * factor, "other" + axis);
  };
  emit(q.dims, 1, 1);
  if (body.bidirectional) {
    out.axisNames["2"] = "Reverse";
    emit(q.dims.map(reverseDim), 2, 0.18);
  }
  if (body.previousPeriod) {
    const length = q.end - q.start;
    const period = length < 2 * 3600e3 ? 3600e3 : length < 2 * 86400e3 ? 86400e3 : length < 14 * 86400e3 ? 7 * 86400e3 : 28 * 86400e3;
    out.axisNames["3"] = period === 3600e3 ? "Previous hour" : period === 86400e3 ? "Previous day" : period === 7 * 86400e3 ? "Previous week" : "Previous 4 weeks";
    add([], 3, 0.93, "previous", -period);
  }
  return out;
}

function sankey(body: Json) {
  const q = pick(body);
  const { table } = chooseTable(q.start, q.end, 200, q.dims, q.filter);
  const scale = totalBps * unitScale(q.units) * filterFactor(q.filter) * 1.1;
  const series = seriesOf(q.dims, q.t4);
  const rows: string[][] = [];
  const values: number[] = [];
  for (const s of series.slice(0, q.limit)) {
    rows.push(s.row);
    values.push(s.weight * scale);
  }
  const rest = series.slice(q.limit).reduce((a, s) => a + s.weight, 0);
  if (rest > 0) {
    rows.push(q.dims.map(() => "Other"));
    values.push(rest * scale);
  }
  const nodes = new Set<string>();
  const links = new Map<string, number>();
  rows.forEach((row, i) => {
    const names = row.map((v, j) => `${q.dims[j]}: ${v}`);
    names.forEach((n) => nodes.add(n));
    for (let j = 0; j + 1 < names.length; j++) {
      const k = `${names[j]}\u0000${names[j + 1]}`;
      links.set(k, (links.get(k) ?? 0) + values[i]);
    }
  });
  return {
    table,
    sql: fakeSQL("sankey", table, q),
    rows,
    values,
    nodes: [...nodes],
    links: [...links].map(([k, value]) => {
      const [source, target] = k.split("\u0000");
      return { source, target, value };
    }),
  };
}

function table(body: Json) {
  const l = line({ ...body, points: 100 });
  return {
    table: l.table,
    sql: l.sql.replace("-- line", "-- table"),
    rows: l.rows.map((dimensions, i) => ({
      dimensions,
      bytes: (l.avg[i] * ((Date.parse(String(body.end)) - Date.parse(String(body.start))) / 1000)) / 8 / unitScale(String(body.units ?? "l3bps")),
      packets: (l.avg[i] * 600) / 8 / 880,
      flows: (l.avg[i] * 600) / 8 / 880 / 9,
      min: l.min[i],
      max: l.max[i],
      avg: l.avg[i],
      p95: l.p95[i],
      last: l.last[i],
      total: l.total[i],
    })),
  };
}

// ---------------------------------------------------------------- flows
const defaultFlowColumns = ["TimeReceived", "ExporterName", "InIfName", "OutIfName", "SrcAddr", "DstAddr", "Proto", "SrcPort", "DstPort", "Bytes", "Packets", "SamplingRate", "SrcAS", "DstAS"];

function flowRecord(t: number, seq: number, cols: string[]): (string | number | number[])[] {
  const r = (k: string) => hash(`${seq}:${k}`);
  const choose = (k: string) => {
    const v = valuesOf(k, 32);
    return v[Math.floor(Math.pow(r(k), 2) * v.length)];
  };
  return cols.map((c) => {
    switch (c) {
      case "TimeReceived": {
        const iso = new Date(t).toISOString();
        return iso.replace("Z", String(seq % 1000).padStart(3, "0") + "000Z").replace(/\.(\d{3})(\d{3})000Z$/, ".$1$2000Z");
      }
      case "SrcAddr":
        return srcHosts[Math.floor(r(c) * srcHosts.length)];
      case "DstAddr":
        return dstHosts[Math.floor(r(c) * dstHosts.length)];
      case "Bytes":
        return Math.floor(64 + r(c) * 1436) * (1 + Math.floor(r("p") * 20));
      case "Packets":
        return 1 + Math.floor(r("p") * 20);
      case "SamplingRate":
        return 1000;
      case "SrcAS":
      case "DstAS":
      case "Dst1stAS":
        return Number(choose(c).slice(2));
      case "SrcPort":
      case "DstPort":
      case "InIfSpeed":
      case "OutIfSpeed":
      case "InIf":
      case "OutIf":
      case "ForwardingStatus":
        return Number(choose(c));
      case "DstASPath":
        return [174, 3356, Number(choose("DstAS").slice(2))];
      case "ExporterAddress":
        return exporters[seq % exporters.length][0];
      case "ExporterName":
        return exporters[seq % exporters.length][1];
      default:
        return choose(c) ?? "";
    }
  });
}

function flows(body: Json) {
  const end = body.before ? Date.parse(String(body.before)) - 1 : Math.min(Date.parse(String(body.end)), Date.now());
  const start = body.after ? Date.parse(String(body.after)) + 1 : Date.parse(String(body.start));
  const limit = Math.min(Number(body.limit ?? 100), 10000);
  const cols = (body.columns as string[] | undefined)?.length ? (body.columns as string[]) : defaultFlowColumns;
  const rows: unknown[][] = [];
  // About 60 stored flows per second, at fixed instants so that pages are stable.
  const stepMs = 17;
  for (let t = Math.floor(end / stepMs) * stepMs; t >= start && rows.length < limit; t -= stepMs) {
    rows.push(flowRecord(t, Math.floor(t / stepMs), cols));
  }
  const q = pick({ ...body, dimensions: [] });
  return { table: "flows", sql: fakeSQL("flows", "flows", q), columns: cols, rows };
}

// ---------------------------------------------------------------- filter
const operators = ["=", "!=", "<", "<=", ">", ">=", "IN", "NOTIN", "LIKE", "UNLIKE", "ILIKE", "IUNLIKE", "<<", "!<<"];
const keywords = ["AND", "OR", "NOT"];

interface Token {
  kind: "word" | "op" | "string" | "paren" | "comma" | "error";
  text: string;
  from: number; // byte offsets
  to: number;
}

function byteLength(s: string): number {
  return Buffer.byteLength(s, "utf8");
}

function tokenize(src: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  const at = (idx: number) => byteLength(src.slice(0, idx));
  while (i < src.length) {
    const c = src[i];
    if (/\s/.test(c)) {
      i++;
      continue;
    }
    if (src.startsWith("--", i)) {
      while (i < src.length && src[i] !== "\n") i++;
      continue;
    }
    if (src.startsWith("/*", i)) {
      const end = src.indexOf("*/", i + 2);
      i = end < 0 ? src.length : end + 2;
      continue;
    }
    const start = i;
    if (c === "'" || c === '"') {
      i++;
      while (i < src.length && src[i] !== c) i += src[i] === "\\" ? 2 : 1;
      if (i >= src.length) {
        tokens.push({ kind: "error", text: "an unterminated string", from: at(start), to: at(src.length) });
        return tokens;
      }
      i++;
      tokens.push({ kind: "string", text: src.slice(start, i), from: at(start), to: at(i) });
    } else if (c === "(" || c === ")") {
      i++;
      tokens.push({ kind: "paren", text: c, from: at(start), to: at(i) });
    } else if (c === ",") {
      i++;
      tokens.push({ kind: "comma", text: c, from: at(start), to: at(i) });
    } else if (/[=!<>]/.test(c)) {
      while (i < src.length && /[=!<>]/.test(src[i])) i++;
      tokens.push({ kind: "op", text: src.slice(start, i), from: at(start), to: at(i) });
    } else {
      while (i < src.length && !/[\s()=!<>,'"]/.test(src[i])) i++;
      tokens.push({ kind: "word", text: src.slice(start, i), from: at(start), to: at(i) });
    }
  }
  return tokens;
}

function position(src: string, offset: number) {
  const before = Buffer.from(src, "utf8").subarray(0, offset).toString("utf8");
  const lines = before.split("\n");
  return { offset, line: lines.length, column: lines[lines.length - 1].length + 1 };
}

function validate(filter: string): Json {
  const tokens = tokenize(filter);
  let i = 0;
  const fail = (msg: string, offset: number, expected?: string[]) => {
    throw { message: msg, position: position(filter, offset), expected };
  };
  const end = byteLength(filter);
  const next = () => tokens[i];
  const expr = (): void => {
    term();
    while (next() && next().kind === "word" && ["AND", "OR"].includes(next().text.toUpperCase())) {
      i++;
      if (!next()) fail("expected a condition after " + tokens[i - 1].text.toUpperCase(), end, ["column name", "NOT", "("]);
      term();
    }
  };
  const term = (): void => {
    const t = next();
    if (!t) return fail("expected a condition", end, ["column name"]);
    if (t.kind === "error") return fail(t.text, t.from);
    if (t.kind === "word" && t.text.toUpperCase() === "NOT") {
      i++;
      return term();
    }
    if (t.kind === "paren" && t.text === "(") {
      i++;
      expr();
      if (!next() || next().text !== ")") fail("expected )", next()?.from ?? end, [")"]);
      i++;
      return;
    }
    if (t.kind !== "word") return fail(`expected a column name, not ${t.text}`, t.from, ["column name"]);
    const col = columns.find((c) => c.name.toLowerCase() === t.text.toLowerCase());
    if (!col) return fail(`unknown column ${t.text}`, t.from, ["column name"]);
    i++;
    const op = next();
    if (!op) return fail(`expected an operator after ${col.name}`, end, operators);
    const opText = op.text.toUpperCase();
    if (!operators.includes(opText)) return fail(`expected an operator, not ${op.text}`, op.from, operators);
    i++;
    if (opText === "IN" || opText === "NOTIN") {
      if (!next() || next().text !== "(") return fail("expected ( and a list of values", next()?.from ?? end, ["("]);
      i++;
      for (;;) {
        if (!next()) return fail("expected a value", end);
        i++;
        if (next()?.kind === "comma") {
          i++;
          continue;
        }
        if (next()?.text === ")") {
          i++;
          return;
        }
        return fail("expected , or )", next()?.from ?? end, [",", ")"]);
      }
    }
    const v = next();
    if (!v || (v.kind !== "word" && v.kind !== "string")) return fail(`expected a value for ${col.name}`, v?.from ?? end);
    const ipv4 = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})(\/(\d{1,2}))?$/.exec(v.text);
    const badV4 = ipv4 && (ipv4.slice(1, 5).some((o) => Number(o) > 255) || Number(ipv4[6] ?? 0) > 32);
    if (col.kind === "address" && v.kind === "word" && (badV4 || !/^[0-9a-fA-F:.]+(\/\d+)?$/.test(v.text))) {
      return fail("expected an IPv4 or IPv6 address or prefix", v.from, ["address", "prefix"]);
    }
    if (col.kind === "port" && v.kind === "word" && !(/^\d+$/.test(v.text) && Number(v.text) <= 65535)) {
      return fail("expected a port number (0 to 65535)", v.from, ["port"]);
    }
    if (col.kind === "enum" && col.values && !col.values.includes(v.text.replace(/^['"]|['"]$/g, ""))) {
      return fail(`expected one of ${col.values.join(", ")}`, v.from, col.values);
    }
    i++;
  };
  try {
    if (tokens.length === 0) return { valid: true, normalized: "" };
    expr();
    if (next()) fail(`expected AND or OR, not ${next().text}`, next().from, ["AND", "OR"]);
    return { valid: true, normalized: filter.trim().replace(/\s+/g, " ") };
  } catch (e) {
    if (e && typeof e === "object" && "message" in e) return { valid: false, ...(e as Json) };
    throw e;
  }
}

function complete(filter: string, offset: number): Json {
  const bytes = Buffer.from(filter, "utf8");
  const before = bytes.subarray(0, offset).toString("utf8");
  const m = /[A-Za-z0-9_.:/-]*$/.exec(before)!;
  const prefix = m[0];
  const from = offset - byteLength(prefix);
  const tokens = tokenize(before.slice(0, before.length - prefix.length));
  const last = tokens[tokens.length - 1];
  const prev = tokens[tokens.length - 2];
  let completions: { label: string; kind: string; detail?: string; apply?: string }[] = [];
  const isCol = (t?: Token) => !!t && t.kind === "word" && columns.some((c) => c.name.toLowerCase() === t.text.toLowerCase());
  if (!last || (last.kind === "word" && keywords.includes(last.text.toUpperCase())) || last.text === "(") {
    completions = columns.map((c) => ({ label: c.name, kind: "column", detail: c.type }));
    if (last) completions.push({ label: "NOT", kind: "keyword" });
  } else if (isCol(last)) {
    completions = operators.map((o) => ({ label: o, kind: "operator" }));
  } else if (last.kind === "op" && isCol(prev)) {
    const col = columns.find((c) => c.name.toLowerCase() === prev!.text.toLowerCase())!;
    const vals = col.values?.length ? col.values : valuesOf(col.name, 32);
    completions = vals.map((v) => ({
      label: v,
      kind: "value",
      detail: col.kind === "as" ? "AS" : undefined,
      apply: col.kind === "string" ? `'${v}'` : v,
    }));
  } else {
    completions = ["AND", "OR"].map((k) => ({ label: k, kind: "keyword" }));
  }
  const lower = prefix.toLowerCase();
  completions = completions.filter((c) => c.label.toLowerCase().startsWith(lower) || (c.apply ?? "").toLowerCase().startsWith(lower));
  return { from, to: offset, completions };
}

// ---------------------------------------------------------------- exporters
const started = Date.now();
function exportersAnswer(): Json {
  const base = (exportersFixture as { exporters: Json[] }).exporters[0];
  const shift = (v: unknown): unknown => {
    if (typeof v === "string" && /^\d{4}-\d{2}-\d{2}T/.test(v)) {
      const lag = Date.parse("2026-11-26T10:58:47.33377547Z") - Date.parse(v);
      return new Date(Date.now() - Math.max(0, lag) - 400).toISOString();
    }
    if (Array.isArray(v)) return v.map(shift);
    if (v && typeof v === "object") return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, shift(x)]));
    return v;
  };
  const elapsed = (Date.now() - started) / 1000;
  return {
    exporters: exporters.map(([address], i) => {
      const e = shift(base) as Json;
      const rate = [520, 480, 310, 90, 260][i];
      const flows = Math.floor((3600 + elapsed) * rate);
      return {
        ...e,
        address,
        "first-seen": new Date(started - 3600e3).toISOString(),
        datagrams: Math.floor(flows / 7.4),
        flows,
        errors: i === 3 ? 12 + Math.floor(elapsed / 30) : 0,
        "last-sampling-rate": i === 3 ? 2000 : 1000,
        decoder: i === 4 ? { sflow: (e.decoder as Json).sflow } : i === 3 ? { netflow: [(e.decoder as { netflow: Json[] }).netflow[1]] } : { netflow: [(e.decoder as { netflow: Json[] }).netflow[0]] },
      };
    }),
  };
}

// ---------------------------------------------------------------- widgets
function lastFlow(): Json {
  const cols = columns.filter((c) => !["PacketSizeBucket"].includes(c.name)).map((c) => c.name);
  const t = Date.now() - 1200;
  const rec = flowRecord(t, Math.floor(t / 17), cols);
  return { flow: Object.fromEntries(cols.map((c, i) => [c, rec[i]])) };
}

function top(dimension: string, filter: string): Json {
  const series = seriesOf([dimension], 32).slice(0, 5);
  const f = filterFactor(filter);
  let used = 0;
  const out = series.map((s) => {
    const percent = Math.round(s.weight * 1000 * (0.9 + 0.1 * f)) / 10;
    used += percent;
    return { name: s.row[0], percent };
  });
  out.push({ name: "Other", percent: Math.max(0, Math.round((100 - used) * 10) / 10) });
  return { top: out };
}

// ---------------------------------------------------------------- saved views
interface View {
  id: string;
  name: string;
  owner: string;
  shared: boolean;
  version: number;
  state: Json;
  created: string;
  updated: string;
}
const views: View[] = [
  {
    id: "k3q7d2m9xw1ta",
    name: "Transit by source AS",
    owner: "default",
    shared: true,
    version: 1,
    state: { version: 1, graph: "stacked", start: "24 hours ago", end: "now", dimensions: ["SrcAS"], limit: 10, topBy: "avg", units: "l3bps", filter: "InIfConnectivity = 'transit'", truncate4: 32, truncate6: 128, bidirectional: false, previousPeriod: true, refresh: 0 },
    created: "2026-11-20T09:12:00Z",
    updated: "2026-11-20T09:12:00Z",
  },
  {
    id: "p8n2v5c4rz0qe",
    name: "Where customers' traffic leaves",
    owner: "noc",
    shared: true,
    version: 1,
    state: { version: 1, graph: "sankey", start: "6 hours ago", end: "now", dimensions: ["InIfProvider", "ExporterName", "OutIfName"], limit: 10, topBy: "avg", units: "l3bps", filter: "InIfBoundary = external", truncate4: 32, truncate6: 128, bidirectional: false, previousPeriod: false, refresh: 0 },
    created: "2026-11-21T14:02:00Z",
    updated: "2026-11-24T08:40:00Z",
  },
];

function userOf(req: IncomingMessage) {
  const login = (req.headers["remote-user"] as string) || "default";
  return { login, name: login === "default" ? "Default User" : login };
}

// ---------------------------------------------------------------- plumbing
async function readBody(req: IncomingMessage): Promise<Json> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  const text = Buffer.concat(chunks).toString("utf8");
  return text ? JSON.parse(text) : {};
}

function send(res: ServerResponse, code: number, body: unknown, headers: Record<string, string> = {}) {
  res.statusCode = code;
  res.setHeader("Content-Type", "application/json");
  for (const [k, v] of Object.entries(headers)) res.setHeader(k, v.replace(/\s+/g, " "));
  res.end(JSON.stringify(body));
}

const delay = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function handle(req: IncomingMessage, res: ServerResponse): Promise<boolean> {
  const url = new URL(req.url ?? "/", "http://localhost");
  const p = url.pathname;
  const m = req.method ?? "GET";
  if (!p.startsWith("/api/")) return false;
  await delay(40 + Math.random() * 80);
  const queryAnswer = (a: Json) => send(res, 200, a, { "X-SQL-Query": String(a.sql ?? ""), "X-Flowzero-Table": String(a.table ?? "") });
  try {
    if (m === "GET" && p === "/api/v0/query/config") {
      const now = Date.now();
      return (
        send(res, 200, {
          version: "dev",
          defaultFilter: "InIfBoundary = external",
          dimensionsLimit: 50,
          points: 200,
          columns: columns.map((c) => ({
            name: c.name,
            type: c.type,
            kind: c.kind,
            dimension: c.dimension ?? true,
            filter: true,
            aggregated: !!c.aggregated,
            truncatable: !!c.truncatable,
            values: c.values ?? [],
          })),
          tables: [
            { name: "flows", resolution: 1, ttl: 1296000, oldest: new Date(now - 15 * 86400e3).toISOString() },
            { name: "flows_1m", resolution: 60, ttl: 604800, oldest: new Date(now - 7 * 86400e3).toISOString() },
            { name: "flows_5m", resolution: 300, ttl: 7776000, oldest: new Date(now - 90 * 86400e3).toISOString() },
            { name: "flows_1h", resolution: 3600, ttl: 31536000, oldest: new Date(now - 365 * 86400e3).toISOString() },
          ],
          units: ["l3bps", "l2bps", "pps", "fps", "inl2%", "outl2%"],
        }),
        true
      );
    }
    if (m === "POST" && p === "/api/v0/query/line") return queryAnswer(line(await readBody(req))), true;
    if (m === "POST" && p === "/api/v0/query/sankey") return queryAnswer(sankey(await readBody(req))), true;
    if (m === "POST" && p === "/api/v0/query/table") return queryAnswer(table(await readBody(req))), true;
    if (m === "POST" && p === "/api/v0/query/flows") return queryAnswer(flows(await readBody(req))), true;
    if (m === "POST" && p === "/api/v0/query/filter/validate") {
      const b = await readBody(req);
      return send(res, 200, validate(String(b.filter ?? ""))), true;
    }
    if (m === "POST" && p === "/api/v0/query/filter/complete") {
      const b = await readBody(req);
      return send(res, 200, complete(String(b.filter ?? ""), Number(b.offset ?? 0))), true;
    }
    if (m === "GET" && p === "/api/v0/query/widgets/flow-rate") return send(res, 200, { rate: 1660 * shape(Date.now()) + 40 * Math.random(), period: 60 }), true;
    if (m === "GET" && p === "/api/v0/query/widgets/exporters") return send(res, 200, { exporters: exporters.map(([a]) => a), count: exporters.length }), true;
    if (m === "GET" && p === "/api/v0/query/widgets/last-flow") return send(res, 200, lastFlow()), true;
    if (m === "GET" && p === "/api/v0/query/widgets/top") {
      return send(res, 200, top(url.searchParams.get("dimension") ?? "SrcAS", url.searchParams.get("filter") ?? "")), true;
    }
    if (m === "GET" && p === "/api/v0/query/widgets/graph") {
      const end = Date.now();
      return (
        queryAnswer(line({ start: new Date(end - 86400e3).toISOString(), end: new Date(end).toISOString(), points: Number(url.searchParams.get("points") ?? 200), dimensions: [], filter: url.searchParams.get("filter") ?? "", units: "l3bps" })),
        true
      );
    }
    if (m === "GET" && p === "/api/v0/exporters") return send(res, 200, exportersAnswer()), true;
    if (m === "GET" && p === "/api/v0/console/user") return send(res, 200, userOf(req)), true;
    if (p === "/api/v0/console/views" && m === "GET") {
      const u = userOf(req);
      return send(res, 200, { views: views.filter((v) => v.owner === u.login || v.shared) }), true;
    }
    if (p === "/api/v0/console/views" && m === "POST") {
      if (!req.headers["x-flowzero-request"]) return send(res, 403, { message: "send the header X-Flowzero-Request: 1" }), true;
      const u = userOf(req);
      const b = await readBody(req);
      const now = new Date().toISOString();
      const existing = views.find((v) => v.owner === u.login && v.name === b.name);
      if (existing) {
        Object.assign(existing, { state: b.state, shared: !!b.shared, updated: now });
        return send(res, 200, existing), true;
      }
      const v: View = { id: Math.random().toString(36).slice(2, 15), name: String(b.name), owner: u.login, shared: !!b.shared, version: 1, state: b.state as Json, created: now, updated: now };
      views.push(v);
      return send(res, 201, v), true;
    }
    const vm = /^\/api\/v0\/console\/views\/([^/]+)$/.exec(p);
    if (vm) {
      const u = userOf(req);
      const idx = views.findIndex((v) => v.id === vm[1] && (v.owner === u.login || v.shared));
      if (idx < 0) return send(res, 404, { message: `no saved view ${vm[1]}` }), true;
      if (m === "GET") return send(res, 200, views[idx]), true;
      if (m === "DELETE") {
        if (views[idx].owner !== u.login) return send(res, 403, { message: "only its owner deletes a view" }), true;
        views.splice(idx, 1);
        return send(res, 200, { deleted: vm[1] }), true;
      }
    }
    return send(res, 404, { message: `no API route ${p}` }), true;
  } catch (err) {
    return send(res, 500, { message: String(err) }), true;
  }
}

export function fakeAPI(): Plugin {
  const middleware: Connect.NextHandleFunction = (req, res, next) => {
    handle(req, res).then((done) => (done ? undefined : next()), next);
  };
  return {
    name: "flowzero-fake-api",
    configureServer(server) {
      server.middlewares.use(middleware);
    },
    configurePreviewServer(server) {
      server.middlewares.use(middleware);
    },
  };
}
