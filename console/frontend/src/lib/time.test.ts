import { describe, expect, test } from "vitest";
import { formatAgo, formatDuration, formatTime, isLive, parseTime, presetOf, presets, resolveRange, shiftRange, toRFC3339 } from "./time";

// One reference time for every case. Calendar words ("today", "2026-11-25 14:00") are read
// in the browser's zone: their expected values are built with local-time constructors, and
// make console-test runs this file in several zones (TZ=UTC, America/Los_Angeles,
// Asia/Kolkata, Pacific/Kiritimati).
const now = new Date("2026-11-26T10:30:15Z");
const iso = (text: string) => {
  const d = parseTime(text, now);
  return d ? toRFC3339(d) : null;
};
const local = (...a: [number, number, number?, number?, number?]) => toRFC3339(new Date(a[0], a[1], a[2] ?? 1, a[3] ?? 0, a[4] ?? 0));
const day = (offset: number) => toRFC3339(new Date(now.getFullYear(), now.getMonth(), now.getDate() + offset));
const months = (n: number) => {
  const d = new Date(now.getTime());
  d.setMonth(d.getMonth() - n);
  return toRFC3339(d);
};
const years = (n: number) => {
  const d = new Date(now.getTime());
  d.setFullYear(d.getFullYear() - n);
  return toRFC3339(d);
};
// The Monday of now's local week: Monday 23 November in every zone (now is Thursday 26 in
// UTC, Wednesday 25 at UTC-11, Friday 27 at UTC+14).
const monday = local(2026, 10, 23);

describe("parseTime", () => {
  test.each([
    ["now", "2026-11-26T10:30:15Z"],
    [" NOW ", "2026-11-26T10:30:15Z"],
    ["6 hours ago", "2026-11-26T04:30:15Z"],
    ["6h ago", "2026-11-26T04:30:15Z"],
    ["an hour ago", "2026-11-26T09:30:15Z"],
    ["last 6 hours", "2026-11-26T04:30:15Z"],
    ["last hour", "2026-11-26T09:30:15Z"],
    ["past 2 days", "2026-11-24T10:30:15Z"],
    ["now-6h", "2026-11-26T04:30:15Z"],
    ["now - 15 minutes", "2026-11-26T10:15:15Z"],
    ["-30m", "2026-11-26T10:00:15Z"],
    ["1 week ago", "2026-11-19T10:30:15Z"],
    ["3 months ago", months(3)],
    ["1 year ago", years(1)],
    ["today", day(0)],
    ["yesterday", day(-1)],
    ["end of today", day(1)],
    ["start of this week", monday],
    ["start of last week", local(2026, 10, 16)],
    ["start of this month", local(2026, 10, 1)],
    ["start of last month", local(2026, 9, 1)],
    ["2026-11-25T14:00:00Z", "2026-11-25T14:00:00Z"],
    ["2026-11-25T14:00:00.250Z", "2026-11-25T14:00:00.250Z"],
    ["2026-11-25T14:00:00+02:00", "2026-11-25T12:00:00Z"],
    ["2026-11-25 14:00", local(2026, 10, 25, 14)],
    ["2026-11-25", local(2026, 10, 25)],
    ["yesterday at 7pm", toRFC3339(new Date(now.getFullYear(), now.getMonth(), now.getDate() - 1, 19))],
  ])("%s", (text, want) => {
    expect(iso(text)).toBe(want);
  });

  test.each(["", "soon", "6 parsecs ago", "2026-13-01", "2026-02-30", "2026-11-25T25:00", "yesterday or so", "now+"])(
    "%j is refused",
    (text) => {
      expect(parseTime(text, now)).toBeNull();
    },
  );
});

describe("ranges", () => {
  test("resolveRange checks both ends and their order", () => {
    expect(resolveRange("6 hours ago", "now", now).range?.start.toISOString()).toBe("2026-11-26T04:30:15.000Z");
    expect(resolveRange("now", "6 hours ago", now).errors.end).toMatch(/after the start/);
    expect(resolveRange("soon", "now", now).errors.start).toMatch(/cannot read "soon"/);
    expect(resolveRange("", "", now).errors).toEqual({ start: "a start is needed", end: "an end is needed" });
  });

  test("shiftRange moves by the range's own length", () => {
    const r = resolveRange("6 hours ago", "now", now).range!;
    expect(shiftRange(r, -1)).toEqual({ start: "2026-11-25T22:30:15Z", end: "2026-11-26T04:30:15Z" });
    expect(shiftRange(r, 1)).toEqual({ start: "2026-11-26T10:30:15Z", end: "2026-11-26T16:30:15Z" });
  });

  test("isLive only for ranges ending now", () => {
    expect(isLive("now")).toBe(true);
    expect(isLive(" Now")).toBe(true);
    expect(isLive("today")).toBe(false);
    expect(isLive("2026-11-26T10:30:15Z")).toBe(false);
  });

  test("every preset parses, starts before it ends, and is found back", () => {
    for (const p of presets) {
      const r = resolveRange(p.start, p.end, now);
      expect(r.errors, p.label).toEqual({});
      expect(presetOf(p.start, p.end)?.label).toBe(p.label);
    }
    expect(presetOf("7 hours ago", "now")).toBeUndefined();
  });
});

describe("display", () => {
  test("formatTime in UTC and local", () => {
    expect(formatTime("2026-11-26T04:05:06Z", "utc")).toBe("2026-11-26 04:05:06");
    const d = new Date(2026, 10, 26, 4, 5, 6);
    expect(formatTime(d, "local", false)).toBe("2026-11-26 04:05");
    expect(formatTime(d, "local")).toBe("2026-11-26 04:05:06");
    expect(formatTime("garbage", "utc")).toBe("garbage");
  });
  test("formatAgo", () => {
    expect(formatAgo("2026-11-26T10:30:10Z", now)).toBe("5 s ago");
    expect(formatAgo("2026-11-26T10:20:15Z", now)).toBe("10 min ago");
    expect(formatAgo("2026-11-26T07:30:15Z", now)).toBe("3 h ago");
    expect(formatAgo("2026-11-20T10:30:15Z", now)).toBe("6 d ago");
    expect(formatAgo("2026-11-26T10:31:15Z", now)).toBe("in the future");
  });
  test("formatDuration", () => {
    expect(formatDuration(6 * 3600_000)).toBe("6 h");
    expect(formatDuration(2 * 86400_000)).toBe("2 d");
    expect(formatDuration(15 * 60_000)).toBe("15 min");
    expect(formatDuration(42_000)).toBe("42 s");
    expect(formatDuration(6773_000)).toBe("1 h 52 min");
    expect(formatDuration((2 * 86400 + 3 * 3600 + 5) * 1000)).toBe("2 d 3 h");
    expect(formatDuration((86400 + 59) * 1000)).toBe("1 d");
    expect(formatDuration(125_000)).toBe("2 min 5 s");
    expect(formatDuration(0)).toBe("0 s");
  });
});
