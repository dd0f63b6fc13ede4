// The HTTP API the console uses, as docs/api.md describes it. Every request goes through
// client.ts: a change of the contract is an edit there and here.

export type Units = "l3bps" | "l2bps" | "pps" | "fps" | "inl2%" | "outl2%";
export type TopBy = "avg" | "max" | "last" | "p95";

export type ColumnKind =
  | "address"
  | "as"
  | "aspath"
  | "communities"
  | "largecommunities"
  | "mac"
  | "port"
  | "protocol"
  | "etype"
  | "enum"
  | "string"
  | "number"
  | "time"
  | "array";

export interface Column {
  name: string;
  type: string;
  kind: ColumnKind;
  dimension: boolean;
  filter: boolean;
  aggregated: boolean;
  truncatable: boolean;
  values?: string[];
}

export interface Table {
  name: string;
  resolution: number;
  ttl: number;
  oldest?: string;
}

// GET /api/v0/query/config
export interface QueryConfig {
  version: string;
  defaultFilter: string;
  dimensionsLimit: number;
  points: number;
  columns: Column[];
  tables: Table[];
  units: Units[];
}

// Fields common to the query bodies.
export interface QueryCommon {
  start: string;
  end: string;
  dimensions: string[];
  limit: number;
  topBy: TopBy;
  units: Units;
  filter: string;
  truncate4: number;
  truncate6: number;
  table?: "auto" | "flows";
}

export interface LineRequest extends QueryCommon {
  points: number;
  bidirectional: boolean;
  previousPeriod: boolean;
}

// Axis of a series in a line answer: 1 direct, 2 reverse (bidirectional), 3 previous period.
export type Axis = 1 | 2 | 3;

export interface LineResponse {
  table: string;
  interval: number;
  sql: string;
  t: string[];
  rows: string[][];
  axis: Axis[];
  points: number[][];
  min: number[];
  max: number[];
  avg: number[];
  p95: number[];
  last: number[];
  total: number[];
  axisNames?: Record<string, string>;
}

export type SankeyRequest = QueryCommon;

export interface SankeyLink {
  source: string;
  target: string;
  value: number;
}

export interface SankeyResponse {
  table: string;
  sql: string;
  rows: string[][];
  values: number[];
  nodes: string[];
  links: SankeyLink[];
}

export type TableRequest = QueryCommon;

export interface TableRow {
  dimensions: string[];
  bytes: number;
  packets: number;
  flows: number;
  min: number;
  max: number;
  avg: number;
  p95: number;
  last: number;
  total: number;
}

export interface TableResponse {
  table: string;
  sql: string;
  rows: TableRow[];
}

export interface FlowsRequest {
  start: string;
  end: string;
  filter: string;
  limit: number;
  columns?: string[];
  before?: string;
  after?: string;
}

export type FlowValue = string | number | null | FlowValue[];

export interface FlowsResponse {
  table: string;
  sql: string;
  columns: string[];
  rows: FlowValue[][];
}

export interface FilterPosition {
  offset: number;
  line: number;
  column: number;
}

export type FilterValidation =
  | { valid: true; normalized: string }
  | { valid: false; message: string; position: FilterPosition; expected?: string[] };

export interface Completion {
  label: string;
  kind: "column" | "operator" | "value" | "keyword";
  detail?: string;
  apply?: string;
}

export interface FilterCompletions {
  from: number;
  to: number;
  completions: Completion[];
}

export interface FlowRateWidget {
  rate: number;
  period: number;
}

export interface ExportersWidget {
  exporters: string[];
  count: number;
}

export interface LastFlowWidget {
  flow: Record<string, FlowValue>;
}

export interface TopWidget {
  top: { name: string; percent: number }[];
}

// GET /api/v0/exporters (collector/http.go: ExporterStatus, with the decoders' details).
export interface ExporterStatus {
  address: string;
  "first-seen": string;
  "last-packet": string;
  datagrams: number;
  flows: number;
  errors: number;
  allowed: boolean;
  "last-sampling-rate": number;
  decoder?: {
    netflow?: NetFlowSession[];
    sflow?: SFlowAgent[];
  };
}

export interface NetFlowSession {
  exporter: string;
  "source-port": number;
  "last-packet": string;
  domains: NetFlowDomain[];
  "pending-sets": number;
  "pending-bytes": number;
}

export interface NetFlowDomain {
  version: number;
  "observation-domain": number;
  "system-init-ms"?: number;
  templates: NetFlowTemplate[];
  "sampling-rates": { "sampler-id": number; rate: number }[];
  pending?: { "template-id": number; bytes: number; received: string }[];
}

export interface NetFlowTemplate {
  id: number;
  kind: "data" | "options";
  "scope-fields"?: number;
  "record-length": number;
  fields: { ie: number; enterprise?: number; name?: string; length: number; scope?: boolean }[];
  received?: string;
  "last-used"?: string;
}

export interface SFlowAgent {
  agent: string;
  "sub-agents": {
    id: number;
    datagrams: number;
    "last-datagram": string;
    "sequence-number": number;
    "uptime-ms": number;
    "data-sources": {
      type: number;
      index: number;
      "sampling-rate": number;
      samples: number;
      "last-sample": string;
    }[];
  }[];
}

export interface ExportersResponse {
  exporters: ExporterStatus[];
}

// GET /api/v0/console/user
export interface User {
  login: string;
  name?: string;
  email?: string;
  logoutURL?: string;
}

// Saved views: /api/v0/console/views
export interface SavedView {
  id: string;
  name: string;
  owner: string;
  shared: boolean;
  version: number;
  state: Record<string, unknown>;
  created: string;
  updated: string;
}

export interface ViewsResponse {
  views: SavedView[];
}

export interface NewView {
  name: string;
  shared: boolean;
  state: Record<string, unknown>;
}
