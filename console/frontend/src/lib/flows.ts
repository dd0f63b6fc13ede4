// Display of raw flow values (the flows table, the last flow): times in the zone chosen, AS
// numbers as AS13335, counters with separators, lists space-separated.
import type { FlowValue } from "@/api/types";
import { columnByName } from "./server";
import { formatCount } from "./units";
import { formatTime, type TimeZonePref } from "./time";

// parseFlowTime reads a time the API gives as RFC 3339 (any precision), "YYYY-MM-DD hh:mm:ss"
// (UTC, as ClickHouse prints a DateTime) or seconds since the epoch.
export function parseFlowTime(v: FlowValue): Date | null {
  if (typeof v === "number") return new Date(v * 1000);
  if (typeof v !== "string") return null;
  const s = /^\d{4}-\d{2}-\d{2} \d/.test(v) && !/[zZ]|[+-]\d{2}:?\d{2}$/.test(v) ? v.replace(" ", "T") + "Z" : v;
  const d = new Date(s);
  return isNaN(d.getTime()) ? null : d;
}

export function formatFlowValue(column: string, v: FlowValue, zone: TimeZonePref): string {
  if (v === null || v === undefined) return "";
  const col = columnByName.value.get(column.toLowerCase());
  const kind = col?.kind ?? (/^Time/.test(column) ? "time" : "");
  if (Array.isArray(v)) return v.map((x) => (kind === "aspath" && typeof x === "number" ? `AS${x}` : String(x))).join(" ");
  if (kind === "time") {
    const d = parseFlowTime(v);
    if (!d) return String(v);
    const frac = typeof v === "string" ? /\.(\d{1,3})/.exec(v)?.[1] : undefined;
    return formatTime(d, zone) + (frac ? `.${frac.padEnd(3, "0")}` : "");
  }
  if (kind === "as" && typeof v === "number") return `AS${v}`;
  if (typeof v === "number" && (column === "Bytes" || column === "Packets")) return formatCount(v);
  return String(v);
}
