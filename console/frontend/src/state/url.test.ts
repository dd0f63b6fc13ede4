import { describe, expect, test } from "vitest";
import LZString from "lz-string";
import { stringifyQuery } from "vue-router";
import { decodeAkvorado, decodeState, encodeState, hasState } from "./url";
import { MigrationError, neutralState, type VisualizeState } from "./visualize";

const roundTrip = (s: VisualizeState) => decodeState(new URLSearchParams(encodeState(s)));

describe("URL state", () => {
  test("the neutral state is just the version", () => {
    expect(encodeState(neutralState())).toBe("v=1");
    expect(roundTrip(neutralState())).toEqual({ state: neutralState(), notes: [] });
  });

  // Each setting away from its neutral value, alone, then all of them at once.
  const changes: Partial<VisualizeState>[] = [
    { graph: "sankey" },
    { graph: "stacked100" },
    { graph: "lines" },
    { graph: "grid" },
    { graph: "heatmap" },
    { start: "2026-11-25T14:00:00Z" },
    { start: "yesterday at 7pm" },
    { end: "today" },
    { end: "2026-11-26T00:00:00+01:00" },
    { dimensions: ["SrcAS"] },
    { dimensions: ["SrcAddr", "DstAS", "InIfName", "ExporterName"] },
    { limit: 1 },
    { limit: 50 },
    { topBy: "max" },
    { topBy: "last" },
    { topBy: "p95" },
    { units: "l2bps" },
    { units: "pps" },
    { units: "fps" },
    { units: "inl2%" },
    { units: "outl2%" },
    { filter: "InIfBoundary = external" },
    { filter: "SrcAddr << 192.0.2.0/24 AND (Proto = TCP OR DstPort IN (80, 443)) -- web & co\nAND ExporterName LIKE 'edge%'" },
    { filter: "InIfDescription = \"transit: Cogent #1\" AND DstNetName != 'a+b=c?d&e'" },
    { filter: "SrcCountry = 'FR' /* 100% sure */" },
    { truncate4: 24 },
    { truncate4: 0 },
    { truncate6: 48 },
    { bidirectional: true },
    { previousPeriod: true },
    { refresh: 10 },
    { refresh: 300 },
  ];
  test.each(changes.map((c) => [JSON.stringify(c), c] as const))("round trip of %s", (_, change) => {
    const s = { ...neutralState(), ...change };
    const { state, notes } = roundTrip(s);
    expect(notes).toEqual([]);
    expect(state).toEqual(s);
  });

  // The page navigates with vue-router, which re-encodes the query: the address bar must
  // show what encodeState wrote.
  test.each(changes.map((c) => [JSON.stringify(c), c] as const))("vue-router writes %s the same way", (_, change) => {
    const q = encodeState({ ...neutralState(), ...change });
    expect(stringifyQuery(Object.fromEntries(new URLSearchParams(q)))).toBe(q);
  });

  test("all settings at once", () => {
    const all = Object.assign({ ...neutralState() }, ...changes.filter((c) => !("graph" in c) || c.graph === "lines"));
    expect(roundTrip(all).state).toEqual(all);
  });

  test("the URL reads as the settings", () => {
    const s: VisualizeState = {
      ...neutralState(),
      graph: "sankey",
      dimensions: ["SrcAS", "DstAS"],
      filter: "InIfBoundary = external",
      start: "6 hours ago",
      end: "now",
      refresh: 60,
    };
    expect(encodeState(s)).toBe("v=1&graph=sankey&dimensions=SrcAS,DstAS&refresh=60s&filter=InIfBoundary+=+external");
    expect(encodeState({ ...s, start: "2026-11-25T14:00:00Z" })).toContain("start=2026-11-25T14:00:00Z");
    expect(encodeState(s, { view: "abc123" }).startsWith("view=abc123&v=1&")).toBe(true);
  });

  test("reserved characters are escaped", () => {
    const s = { ...neutralState(), filter: "A = 'x&y' AND B = '50%+#1'" };
    const q = encodeState(s);
    expect(q).not.toMatch(/'x&y'/);
    expect(q).toContain("%26");
    expect(q).toContain("%25");
    expect(q).toContain("%2B");
    expect(q).toContain("%23");
  });

  test("hand-written values a person would type", () => {
    const p = new URLSearchParams("v=1&dimensions=SrcAS,%20DstAS,&bidirectional=1&refresh=1m&limit=5");
    const { state, notes } = decodeState(p);
    expect(notes).toEqual([]);
    expect(state.dimensions).toEqual(["SrcAS", "DstAS"]);
    expect(state.bidirectional).toBe(true);
    expect(state.refresh).toBe(60);
    expect(state.limit).toBe(5);
  });

  test("bad values are named and replaced", () => {
    const { state, notes } = decodeState(new URLSearchParams("v=1&limit=ten&units=gbps&graph=pie"));
    expect(state).toEqual(neutralState());
    expect(notes.map((n) => n.split(":")[0])).toEqual(["graph", "limit", "units"]);
  });

  test("a link without v is of the current version; a newer one is refused", () => {
    expect(decodeState(new URLSearchParams("graph=lines")).state.graph).toBe("lines");
    expect(() => decodeState(new URLSearchParams("v=7&graph=lines"))).toThrow(MigrationError);
  });

  test("hasState", () => {
    expect(hasState(new URLSearchParams(""))).toBe(false);
    expect(hasState(new URLSearchParams("view=x"))).toBe(false);
    expect(hasState(new URLSearchParams("v=1"))).toBe(true);
    expect(hasState(new URLSearchParams("filter=x"))).toBe(true);
  });
});

describe("Akvorado links", () => {
  const akvorado = {
    graphType: "stacked",
    start: "2026-11-26T04:00:00.000Z",
    end: "2026-11-26T10:00:00.000Z",
    humanStart: "6 hours ago",
    humanEnd: "now",
    dimensions: ["SrcAS", "ExporterName"],
    limit: 10,
    limitType: "avg",
    "truncate-v4": 32,
    "truncate-v6": 128,
    filter: "InIfBoundary = external",
    units: "l3bps",
    bidirectional: false,
    previousPeriod: false,
  };
  test("a v1- segment opens with the same settings", () => {
    const segment = "v1-" + LZString.compressToEncodedURIComponent(JSON.stringify(akvorado));
    const r = decodeAkvorado(segment);
    expect(r?.notes).toEqual([]);
    expect(r?.state).toEqual({
      ...neutralState(),
      dimensions: ["SrcAS", "ExporterName"],
      filter: "InIfBoundary = external",
    });
  });
  test("anything else is not an Akvorado link", () => {
    expect(decodeAkvorado("v2-abc")).toBeNull();
    expect(decodeAkvorado("v1-!!!")).toBeNull();
    expect(decodeAkvorado("v1-" + LZString.compressToEncodedURIComponent("[1,2"))).toBeNull();
  });
});
