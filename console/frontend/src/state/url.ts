// The Visualize state in the URL, readable and editable by hand:
//
//   /visualize?v=1&graph=sankey&start=6+hours+ago&end=now&dimensions=SrcAS,DstAS&filter=InIfBoundary+=+external
//
// Keys holding their neutral value are left out; v is always there, so that a future format
// can migrate today's links. A link of Akvorado ("/visualize/v1-<lz-string>") is read too.
import LZString from "lz-string";
import { STATE_VERSION, neutralState, normalize, type VisualizeState } from "./visualize";

// The query parameter of each key, in the order they are written.
const keys: [keyof VisualizeState, string][] = [
  ["graph", "graph"],
  ["start", "start"],
  ["end", "end"],
  ["dimensions", "dimensions"],
  ["limit", "limit"],
  ["topBy", "top-by"],
  ["units", "units"],
  ["truncate4", "truncate4"],
  ["truncate6", "truncate6"],
  ["bidirectional", "bidirectional"],
  ["previousPeriod", "previous-period"],
  ["refresh", "refresh"],
  ["filter", "filter"],
];

// readable percent-encodes a value, but leaves the characters that are safe in a query value
// and common in filters and times as they are, and writes spaces as "+": the encoding
// vue-router applies when the page navigates (url.test.ts checks they agree).
function readable(value: string): string {
  return encodeURIComponent(value)
    .replace(/%20/g, "+")
    .replace(/%3F/gi, "?")
    .replace(/%2C/gi, ",")
    .replace(/%3A/gi, ":")
    .replace(/%2F/gi, "/")
    .replace(/%3D/gi, "=")
    .replace(/%40/gi, "@")
    .replace(/%5B/gi, "[")
    .replace(/%5D/gi, "]");
}

function valueText(key: keyof VisualizeState, value: VisualizeState[keyof VisualizeState]): string {
  if (key === "dimensions") return (value as string[]).join(",");
  if (key === "refresh") return value === 0 ? "off" : `${value}s`;
  return String(value);
}

// encodeState returns the query string (without "?") of a state; extra parameters (the
// saved view it came from) come first.
export function encodeState(state: VisualizeState, extra: Record<string, string> = {}): string {
  const neutral = neutralState();
  const parts: string[] = [];
  for (const [k, v] of Object.entries(extra)) parts.push(`${k}=${readable(v)}`);
  parts.push(`v=${state.version}`);
  for (const [key, param] of keys) {
    const text = valueText(key, state[key]);
    if (text === valueText(key, neutral[key])) continue;
    parts.push(`${param}=${readable(text)}`);
  }
  return parts.join("&");
}

// queryToRaw turns query parameters into a raw state of the version they declare: values
// are converted to the types of the format; normalize checks them.
function queryToRaw(params: URLSearchParams): Record<string, unknown> {
  const raw: Record<string, unknown> = {};
  const v = params.get("v");
  raw.version = v === null || v === "" ? STATE_VERSION : /^\d+$/.test(v) ? Number(v) : v;
  for (const [key, param] of keys) {
    const text = params.get(param);
    if (text === null) continue;
    switch (key) {
      case "dimensions":
        raw[key] = text === "" ? [] : text.split(",").map((d) => d.trim()).filter((d) => d !== "");
        break;
      case "limit":
      case "truncate4":
      case "truncate6":
        raw[key] = /^\d+$/.test(text) ? Number(text) : text;
        break;
      case "bidirectional":
      case "previousPeriod":
        raw[key] = text === "true" || text === "1" ? true : text === "false" || text === "0" ? false : text;
        break;
      case "refresh": {
        const m = /^(\d+)(s|m)?$/.exec(text);
        raw[key] = text === "off" ? 0 : m ? Number(m[1]) * (m[2] === "m" ? 60 : 1) : text;
        break;
      }
      default:
        raw[key] = text;
    }
  }
  return raw;
}

// hasState tells if a query string carries a state (v or any key of the format).
export function hasState(params: URLSearchParams): boolean {
  return params.has("v") || keys.some(([, p]) => params.has(p));
}

// decodeState reads a state from query parameters. It throws MigrationError for a state it
// cannot read at all (a newer version).
export function decodeState(params: URLSearchParams): { state: VisualizeState; notes: string[] } {
  return normalize(queryToRaw(params));
}

// decodeAkvorado reads the path segment of an Akvorado Visualize link ("v1-" then the state
// compressed by lz-string), or returns null.
export function decodeAkvorado(segment: string): { state: VisualizeState; notes: string[] } | null {
  if (!segment.startsWith("v1-")) return null;
  const json = LZString.decompressFromEncodedURIComponent(segment.slice(3));
  if (!json) return null;
  let raw: unknown;
  try {
    raw = JSON.parse(json);
  } catch {
    return null;
  }
  if (raw === null || typeof raw !== "object") return null;
  // Akvorado's states carry no version: migrate() recognises them by their keys.
  const { version: _ignored, ...rest } = raw as Record<string, unknown>;
  return normalize(rest);
}
