// The state of the Visualize page: every setting, versioned. The same object is the URL
// (readable query parameters, url.ts) and the state of a saved view. A state of an older
// version is migrated, never refused: links and views keep working across upgrades. The Go
// package (console/state.go) migrates and checks saved views the same way; both run the
// cases of console/testdata/states.json.
import type { TopBy, Units } from "@/api/types";

export const STATE_VERSION = 1;

export const graphTypes = {
  stacked: "Stacked areas",
  stacked100: "100 % stacked",
  lines: "Lines",
  grid: "Grid",
  sankey: "Sankey",
  heatmap: "Heat map",
} as const;
export type GraphType = keyof typeof graphTypes;

export const topByChoices: Record<TopBy, string> = {
  avg: "Average",
  max: "Maximum",
  last: "Last value",
  p95: "95th percentile",
};

export const unitsChoices: Units[] = ["l3bps", "l2bps", "pps", "fps", "inl2%", "outl2%"];

// Auto-refresh periods, in seconds (0: off).
export const refreshChoices = [0, 10, 30, 60, 300] as const;

export interface VisualizeState {
  version: typeof STATE_VERSION;
  graph: GraphType;
  // start and end are kept as typed ("6 hours ago", "now", RFC 3339).
  start: string;
  end: string;
  dimensions: string[];
  limit: number;
  topBy: TopBy;
  units: Units;
  filter: string;
  truncate4: number;
  truncate6: number;
  bidirectional: boolean;
  previousPeriod: boolean;
  refresh: number;
}

// Bounds shared with console/state.go.
export const bounds = {
  textLength: 100,
  filterLength: 4096,
  dimensions: 10,
  limit: 1000,
};

// neutralState is the value of every key a state leaves out. It is part of the format: a
// change of it is a new version, whose migration writes the old value explicitly.
export function neutralState(): VisualizeState {
  return {
    version: STATE_VERSION,
    graph: "stacked",
    start: "6 hours ago",
    end: "now",
    dimensions: [],
    limit: 10,
    topBy: "avg",
    units: "l3bps",
    filter: "",
    truncate4: 32,
    truncate6: 128,
    bidirectional: false,
    previousPeriod: false,
    refresh: 0,
  };
}

// initialState is what /visualize shows without a state: the server's default filter and the
// two dimensions users of flow tools look at first.
export function initialState(defaultFilter: string, dimensions: string[] = ["SrcAS", "ExporterName"]): VisualizeState {
  return { ...neutralState(), dimensions, filter: defaultFilter };
}

// Graph types that draw the reverse direction and the previous period.
export const bidirectionalGraphs: GraphType[] = ["stacked", "stacked100", "lines", "grid"];
// The previous period is a total: beside stacked series it compares with their top; beside
// lines it would dwarf them.
export const previousPeriodGraphs: GraphType[] = ["stacked"];

// MigrationError is a state that cannot be read at all (another format, a newer version).
export class MigrationError extends Error {}

type Raw = Record<string, unknown>;

// Akvorado's Visualize state (the JSON inside its "v1-" links), version 0 here: users coming
// from Akvorado keep their links and saved states.
function fromAkvorado(raw: Raw): Raw {
  const out: Raw = { version: 1 };
  const rename: Record<string, string> = {
    graphType: "graph",
    limitType: "topBy",
    "truncate-v4": "truncate4",
    "truncate-v6": "truncate6",
    previousPeriod: "previousPeriod",
    bidirectional: "bidirectional",
    dimensions: "dimensions",
    limit: "limit",
    units: "units",
    filter: "filter",
  };
  for (const [from, to] of Object.entries(rename)) if (from in raw) out[to] = raw[from];
  // humanStart/humanEnd are what was typed; start/end the absolute times of the last run.
  out.start = raw.humanStart ?? raw.start;
  out.end = raw.humanEnd ?? raw.end;
  return out;
}

// migrations[v] turns a state of version v into one of version v+1.
const migrations: Record<number, (raw: Raw) => Raw> = {
  0: fromAkvorado,
};

// stateVersion reads the version of a raw state: Akvorado's states have none.
export function stateVersion(raw: Raw): number {
  if (raw.version === undefined) return "graphType" in raw || "humanStart" in raw ? 0 : STATE_VERSION;
  const v = raw.version;
  if (typeof v !== "number" || !Number.isInteger(v) || v < 0) {
    throw new MigrationError(`version: not a version number: ${JSON.stringify(v)}`);
  }
  return v;
}

// migrate brings a raw state of any known version to the current one, without checking the
// values (normalize does).
export function migrate(input: unknown): Raw {
  if (input === null || typeof input !== "object" || Array.isArray(input)) {
    throw new MigrationError("a state is a JSON object");
  }
  let raw = { ...(input as Raw) };
  let v = stateVersion(raw);
  if (v > STATE_VERSION) {
    throw new MigrationError(`version ${v} comes from a newer console (this one reads up to ${STATE_VERSION}): upgrade flowzero`);
  }
  while (v < STATE_VERSION) {
    raw = migrations[v](raw);
    v++;
    raw.version = v;
  }
  return raw;
}

const isText = (v: unknown, max: number): v is string => typeof v === "string" && v.length <= max;
const isInt = (v: unknown, min: number, max: number): v is number =>
  typeof v === "number" && Number.isInteger(v) && v >= min && v <= max;
const dimensionRe = /^[A-Za-z][A-Za-z0-9]*$/;

// normalize migrates a raw state and replaces every value it cannot use by the neutral one,
// saying which key it replaced and why: a hand-edited link still opens.
export function normalize(input: unknown): { state: VisualizeState; notes: string[] } {
  const raw = migrate(input);
  const n = neutralState();
  const notes: string[] = [];
  const state = { ...n };
  const bad = (key: keyof VisualizeState, why: string) => notes.push(`${key}: ${why}; using ${JSON.stringify(n[key])}`);

  if (raw.graph !== undefined) {
    if (typeof raw.graph === "string" && raw.graph in graphTypes) state.graph = raw.graph as GraphType;
    else bad("graph", `unknown graph type ${JSON.stringify(raw.graph)}`);
  }
  for (const key of ["start", "end"] as const) {
    if (raw[key] === undefined) continue;
    if (isText(raw[key], bounds.textLength) && raw[key].trim() !== "") state[key] = raw[key];
    else bad(key, "not a time");
  }
  if (raw.dimensions !== undefined) {
    if (Array.isArray(raw.dimensions)) {
      const seen = new Set<string>();
      for (const d of raw.dimensions) {
        if (typeof d !== "string" || !dimensionRe.test(d)) {
          notes.push(`dimensions: ${JSON.stringify(d)} is not a column name; dropped`);
        } else if (!seen.has(d.toLowerCase())) {
          seen.add(d.toLowerCase());
          state.dimensions.push(d);
        }
      }
      if (state.dimensions.length > bounds.dimensions) {
        notes.push(`dimensions: at most ${bounds.dimensions}; kept the first ${bounds.dimensions}`);
        state.dimensions = state.dimensions.slice(0, bounds.dimensions);
      }
    } else bad("dimensions", "not a list");
  }
  if (raw.limit !== undefined) {
    if (isInt(raw.limit, 1, bounds.limit)) state.limit = raw.limit;
    else bad("limit", `not a number in 1..${bounds.limit}`);
  }
  if (raw.topBy !== undefined) {
    if (typeof raw.topBy === "string" && raw.topBy in topByChoices) state.topBy = raw.topBy as TopBy;
    else bad("topBy", `unknown ranking ${JSON.stringify(raw.topBy)}`);
  }
  if (raw.units !== undefined) {
    if (typeof raw.units === "string" && (unitsChoices as string[]).includes(raw.units)) state.units = raw.units as Units;
    else bad("units", `unknown units ${JSON.stringify(raw.units)}`);
  }
  if (raw.filter !== undefined) {
    if (isText(raw.filter, bounds.filterLength)) state.filter = raw.filter;
    else bad("filter", `not a text of at most ${bounds.filterLength} characters`);
  }
  if (raw.truncate4 !== undefined) {
    if (isInt(raw.truncate4, 0, 32)) state.truncate4 = raw.truncate4;
    else bad("truncate4", "not a prefix length in 0..32");
  }
  if (raw.truncate6 !== undefined) {
    if (isInt(raw.truncate6, 0, 128)) state.truncate6 = raw.truncate6;
    else bad("truncate6", "not a prefix length in 0..128");
  }
  for (const key of ["bidirectional", "previousPeriod"] as const) {
    if (raw[key] === undefined) continue;
    if (typeof raw[key] === "boolean") state[key] = raw[key];
    else bad(key, "not true or false");
  }
  if (raw.refresh !== undefined) {
    if ((refreshChoices as readonly unknown[]).includes(raw.refresh)) state.refresh = raw.refresh as number;
    else bad("refresh", `not one of ${refreshChoices.join(", ")} seconds`);
  }
  return { state, notes };
}

// checkColumns drops the dimensions the server does not offer (a column switched off since
// the link was made) and says so.
export function checkColumns(state: VisualizeState, dimensions: string[]): { state: VisualizeState; notes: string[] } {
  const known = new Map(dimensions.map((d) => [d.toLowerCase(), d]));
  const notes: string[] = [];
  const kept: string[] = [];
  for (const d of state.dimensions) {
    const name = known.get(d.toLowerCase());
    if (name) kept.push(name);
    else notes.push(`dimension ${d} is not available (column disabled or unknown); dropped`);
  }
  return { state: { ...state, dimensions: kept }, notes };
}

// sameState compares two states key by key.
export function sameState(a: VisualizeState, b: VisualizeState): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}
