// Time range input: what a person types ("now", "6 hours ago", "last 6 hours", "now-6h",
// "yesterday", RFC 3339, "2026-11-25 14:00") read against one reference time. The state keeps
// the text as typed, so that a link to "6 hours ago → now" still means the last six hours
// tomorrow; the requests carry the absolute times.
import * as chrono from "chrono-node/en";

const unitSeconds: [RegExp, number][] = [
  [/^(s|sec|secs|second|seconds)$/, 1],
  [/^(m|min|mins|minute|minutes)$/, 60],
  [/^(h|hr|hrs|hour|hours)$/, 3600],
  [/^(d|day|days)$/, 86400],
  [/^(w|wk|wks|week|weeks)$/, 7 * 86400],
  [/^(mo|mon|month|months)$/, 30 * 86400],
  [/^(y|yr|yrs|year|years)$/, 365 * 86400],
];

function seconds(unit: string): number | null {
  for (const [re, s] of unitSeconds) if (re.test(unit)) return s;
  return null;
}

// Calendar units move the calendar (a month back from 31 March is 3 March in no sense):
// months and years use the Date setters, shorter units a fixed number of seconds.
function minus(now: Date, n: number, unit: string): Date | null {
  const s = seconds(unit);
  if (s === null) return null;
  const d = new Date(now.getTime());
  if (s === 30 * 86400) {
    d.setMonth(d.getMonth() - n);
    return d;
  }
  if (s === 365 * 86400) {
    d.setFullYear(d.getFullYear() - n);
    return d;
  }
  return new Date(now.getTime() - n * s * 1000);
}

function startOfDay(d: Date): Date {
  return new Date(d.getFullYear(), d.getMonth(), d.getDate());
}

// startOfWeek is Monday 00:00 (ISO 8601 weeks).
function startOfWeek(d: Date): Date {
  const day = (d.getDay() + 6) % 7;
  return new Date(d.getFullYear(), d.getMonth(), d.getDate() - day);
}

const anchors: Record<string, (now: Date) => Date> = {
  now: (now) => now,
  today: startOfDay,
  "start of today": startOfDay,
  "end of today": (now) => new Date(now.getFullYear(), now.getMonth(), now.getDate() + 1),
  yesterday: (now) => new Date(now.getFullYear(), now.getMonth(), now.getDate() - 1),
  "start of yesterday": (now) => new Date(now.getFullYear(), now.getMonth(), now.getDate() - 1),
  "start of this week": startOfWeek,
  "start of last week": (now) => {
    const w = startOfWeek(now);
    return new Date(w.getFullYear(), w.getMonth(), w.getDate() - 7);
  },
  "start of this month": (now) => new Date(now.getFullYear(), now.getMonth(), 1),
  "start of last month": (now) => new Date(now.getFullYear(), now.getMonth() - 1, 1),
  "start of this year": (now) => new Date(now.getFullYear(), 0, 1),
};

// An ISO 8601 / RFC 3339 date, with a space or a T, optional seconds and fraction, and an
// optional zone (local time without it).
const isoRe = /^(\d{4})-(\d{2})-(\d{2})(?:[ T](\d{2}):(\d{2})(?::(\d{2})(\.\d+)?)?)?\s*(Z|[+-]\d{2}:?\d{2})?$/i;

function parseISO(text: string): Date | null {
  const m = isoRe.exec(text);
  if (!m) return null;
  const [, y, mo, d, h = "0", mi = "0", s = "0", frac = "", zone] = m;
  const ms = frac ? Math.round(Number(frac) * 1000) : 0;
  const fields = [Number(y), Number(mo) - 1, Number(d), Number(h), Number(mi), Number(s), ms] as const;
  if (fields[1] > 11 || fields[2] < 1 || fields[2] > 31 || fields[3] > 23 || fields[4] > 59 || fields[5] > 60) return null;
  // Day 31 of a 30-day month rolls over: refuse it.
  const utc = Date.UTC(...fields);
  if (new Date(utc).getUTCDate() !== fields[2]) return null;
  if (!zone) return new Date(...fields);
  if (zone.toUpperCase() === "Z") return new Date(utc);
  const sign = zone[0] === "-" ? -1 : 1;
  const digits = zone.slice(1).replace(":", "");
  const offset = sign * (Number(digits.slice(0, 2)) * 60 + Number(digits.slice(2)));
  return new Date(utc - offset * 60_000);
}

// parseTime reads text as a time relative to now, or returns null when it cannot.
export function parseTime(input: string, now: Date): Date | null {
  const text = input.trim().toLowerCase().replace(/\s+/g, " ");
  if (text === "") return null;
  const anchor = anchors[text];
  if (anchor) return anchor(now);

  // now-6h, now - 6 hours, -6h
  let m = /^(?:now ?)?- ?(\d+) ?([a-z]+)$/.exec(text);
  if (m) return minus(now, Number(m[1]), m[2]);
  // 6 hours ago, 6h ago, an hour ago
  m = /^(\d+|an?) ?([a-z]+) ago$/.exec(text);
  if (m) return minus(now, /^\d/.test(m[1]) ? Number(m[1]) : 1, m[2]);
  // last 6 hours, last hour, past 2 days: the start of that range
  m = /^(?:last|past) (?:(\d+) ?)?([a-z]+)$/.exec(text);
  if (m) return minus(now, m[1] ? Number(m[1]) : 1, m[2]);

  // Anything that starts like an ISO date is one or nothing (chrono would read 2026-13-01
  // as 13 January).
  if (/^\d{4}-/.test(text)) return parseISO(input.trim());

  // Anything else that chrono reads in full ("yesterday at 7pm", "monday 9:00").
  const results = chrono.parse(input, now);
  if (results.length === 1 && results[0].index === 0 && results[0].text.length === input.trim().length) {
    return results[0].start.date();
  }
  return null;
}

// isLive tells if a range end follows the clock, so that querying again brings new data.
export function isLive(end: string): boolean {
  return end.trim().toLowerCase() === "now";
}

// toRFC3339 formats a date in UTC without milliseconds when it has none.
export function toRFC3339(d: Date): string {
  return d.toISOString().replace(".000Z", "Z");
}

export interface Range {
  start: Date;
  end: Date;
}

export type RangeError = { start?: string; end?: string };

// resolveRange reads both ends of a range and checks them.
export function resolveRange(start: string, end: string, now: Date): { range?: Range; errors: RangeError } {
  const s = parseTime(start, now);
  const e = parseTime(end, now);
  const errors: RangeError = {};
  if (!s) errors.start = start.trim() === "" ? "a start is needed" : `cannot read "${start}" as a time`;
  if (!e) errors.end = end.trim() === "" ? "an end is needed" : `cannot read "${end}" as a time`;
  if (s && e && s.getTime() >= e.getTime()) errors.end = "the end must come after the start";
  if (errors.start || errors.end) return { errors };
  return { range: { start: s!, end: e! }, errors };
}

// shiftRange moves a range by its own length: direction -1 is one period back, +1 forward.
// The result is absolute (it no longer follows the clock).
export function shiftRange(range: Range, direction: -1 | 1): { start: string; end: string } {
  const length = range.end.getTime() - range.start.getTime();
  return {
    start: toRFC3339(new Date(range.start.getTime() + direction * length)),
    end: toRFC3339(new Date(range.end.getTime() + direction * length)),
  };
}

export interface Preset {
  label: string;
  start: string;
  end: string;
}

export const presets: Preset[] = [
  { label: "Last 15 minutes", start: "15 minutes ago", end: "now" },
  { label: "Last hour", start: "1 hour ago", end: "now" },
  { label: "Last 6 hours", start: "6 hours ago", end: "now" },
  { label: "Last 12 hours", start: "12 hours ago", end: "now" },
  { label: "Last 24 hours", start: "24 hours ago", end: "now" },
  { label: "Last 2 days", start: "2 days ago", end: "now" },
  { label: "Last 7 days", start: "7 days ago", end: "now" },
  { label: "Last 30 days", start: "30 days ago", end: "now" },
  { label: "Last 90 days", start: "90 days ago", end: "now" },
  { label: "Last year", start: "1 year ago", end: "now" },
  { label: "Today", start: "today", end: "now" },
  { label: "Yesterday", start: "yesterday", end: "today" },
  { label: "This week", start: "start of this week", end: "now" },
  { label: "Last week", start: "start of last week", end: "start of this week" },
  { label: "This month", start: "start of this month", end: "now" },
  { label: "Last month", start: "start of last month", end: "start of this month" },
];

// presetOf finds the preset a range was typed as, if any.
export function presetOf(start: string, end: string): Preset | undefined {
  const s = start.trim().toLowerCase();
  const e = end.trim().toLowerCase();
  return presets.find((p) => p.start === s && p.end === e);
}

// Time display: the browser's zone or UTC, a preference of the user.
export type TimeZonePref = "local" | "utc";

const pad = (n: number, w = 2) => String(n).padStart(w, "0");

// formatTime formats a date as 2026-11-26 14:05:09 in the zone chosen.
export function formatTime(d: Date | string | number, zone: TimeZonePref, withSeconds = true): string {
  const date = d instanceof Date ? d : new Date(d);
  if (isNaN(date.getTime())) return String(d);
  const utc = zone === "utc";
  const y = utc ? date.getUTCFullYear() : date.getFullYear();
  const mo = (utc ? date.getUTCMonth() : date.getMonth()) + 1;
  const day = utc ? date.getUTCDate() : date.getDate();
  const h = utc ? date.getUTCHours() : date.getHours();
  const mi = utc ? date.getUTCMinutes() : date.getMinutes();
  const s = utc ? date.getUTCSeconds() : date.getSeconds();
  return `${y}-${pad(mo)}-${pad(day)} ${pad(h)}:${pad(mi)}${withSeconds ? ":" + pad(s) : ""}`;
}

// formatAgo says how long ago a time was: "4 s ago", "3 min ago", "2 h ago", "5 d ago".
export function formatAgo(d: Date | string, now: Date): string {
  const t = d instanceof Date ? d : new Date(d);
  const s = Math.round((now.getTime() - t.getTime()) / 1000);
  if (!Number.isFinite(s)) return "–";
  if (s < 0) return "in the future";
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  return `${Math.floor(s / 86400)} d ago`;
}

// formatDuration names a length of time by its two largest units: 6 h, 2 d 3 h, 1 h 52 min,
// 15 min, 42 s.
export function formatDuration(ms: number): string {
  let s = Math.round(ms / 1000);
  const parts: string[] = [];
  for (const [unit, n] of [["d", 86400], ["h", 3600], ["min", 60], ["s", 1]] as const) {
    const v = Math.floor(s / n);
    s -= v * n;
    if (v > 0 || (parts.length > 0 && parts.length < 2)) parts.push(`${v} ${unit}`);
    if (parts.length === 2) break;
  }
  const out = parts.filter((p) => !p.startsWith("0 "));
  return out.length ? out.join(" ") : "0 s";
}
