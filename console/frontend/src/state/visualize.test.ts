import { describe, expect, test } from "vitest";
import fixture from "../../../testdata/states.json";
import { STATE_VERSION, MigrationError, checkColumns, initialState, migrate, neutralState, normalize, stateVersion } from "./visualize";

// console/testdata/states.json holds the cases console/state.go runs too: both sides must
// migrate alike, and the neutral state must be the same object on both sides.
describe("states.json, shared with console/state.go", () => {
  test("current version and neutral state", () => {
    expect(STATE_VERSION).toBe(fixture.current);
    expect(neutralState()).toEqual(fixture.neutral);
    // Same keys in the same order: the URL and the saved views write them in this order.
    expect(Object.keys(neutralState())).toEqual(Object.keys(fixture.neutral));
  });

  test.each(fixture.migrations.map((c) => [c.name, c] as const))("migration %s", (_, c) => {
    const { state, notes } = normalize(c.input);
    expect(notes).toEqual([]);
    expect(state).toEqual(c.want);
  });

  test.each(fixture.invalid.map((c) => [c.name, c] as const))("invalid %s: the key is named, the neutral value used", (_, c) => {
    const { state, notes } = normalize(c.input);
    expect(notes.length).toBe(1);
    expect(notes[0].startsWith(`${c.key}:`)).toBe(true);
    const key = c.key as keyof typeof state;
    expect(state[key]).toEqual(fixture.neutral[key as keyof typeof fixture.neutral]);
  });

  test.each(fixture.unreadable.map((c) => [c.name, c] as const))("unreadable %s", (_, c) => {
    expect(() => normalize(c.input)).toThrow(MigrationError);
  });
});

describe("migrate", () => {
  test("a newer state says to upgrade", () => {
    expect(() => migrate({ version: STATE_VERSION + 1 })).toThrow(/newer console.*upgrade flowzero/);
  });
  test("Akvorado states are version 0", () => {
    expect(stateVersion({ graphType: "stacked" })).toBe(0);
    expect(stateVersion({ humanStart: "1 hour ago" })).toBe(0);
    expect(stateVersion({})).toBe(STATE_VERSION);
  });
  test("the input is not modified", () => {
    const input = { graphType: "lines", humanStart: "1 hour ago" };
    migrate(input);
    expect(input).toEqual({ graphType: "lines", humanStart: "1 hour ago" });
  });
});

describe("normalize", () => {
  test("duplicate dimensions are kept once, whatever their case", () => {
    expect(normalize({ version: 1, dimensions: ["SrcAS", "srcas", "DstAS"] }).state.dimensions).toEqual(["SrcAS", "DstAS"]);
  });
  test("at most 10 dimensions", () => {
    const dims = Array.from({ length: 12 }, (_, i) => `D${i}`);
    const { state, notes } = normalize({ version: 1, dimensions: dims });
    expect(state.dimensions).toHaveLength(10);
    expect(notes[0]).toMatch(/^dimensions: at most 10/);
  });
  test("every bad key is reported", () => {
    const { notes } = normalize({ version: 1, graph: 3, units: "x", limit: -1, refresh: "soon" });
    expect(notes.map((n) => n.split(":")[0])).toEqual(["graph", "limit", "units", "refresh"]);
  });
});

test("initialState takes the server's default filter", () => {
  const s = initialState("InIfBoundary = external");
  expect(s.filter).toBe("InIfBoundary = external");
  expect(s.dimensions).toEqual(["SrcAS", "ExporterName"]);
  expect(s.graph).toBe("stacked");
});

test("checkColumns drops the dimensions the server does not have and fixes their case", () => {
  const s = { ...neutralState(), dimensions: ["srcas", "DstCountry", "ExporterName"] };
  const { state, notes } = checkColumns(s, ["SrcAS", "DstAS", "ExporterName"]);
  expect(state.dimensions).toEqual(["SrcAS", "ExporterName"]);
  expect(notes).toEqual(["dimension DstCountry is not available (column disabled or unknown); dropped"]);
});
