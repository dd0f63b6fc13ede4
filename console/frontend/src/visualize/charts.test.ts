import { describe, expect, test } from "vitest";
import type { LineResponse } from "@/api/types";
import { colorsOf, gridLayout, percentOfTotal, timeSeriesOption } from "./charts";

describe("percentOfTotal", () => {
  test("each direction sums to 100 % at each time; the previous period is left out", () => {
    const p = percentOfTotal(
      [
        [30, 0, 5],
        [10, 0, 15],
        [8, 2, 0], // reverse
        [99, 99, 99], // previous period
      ],
      [1, 1, 2, 3],
    );
    expect(p[0]).toEqual([75, 0, 25]);
    expect(p[1]).toEqual([25, 0, 75]);
    expect(p[2]).toEqual([100, 100, 0]);
    expect(p[3]).toEqual([0, 0, 0]);
  });
});

describe("colorsOf", () => {
  test("the reverse direction keeps the colour of the same values, Other is grey", () => {
    const c = colorsOf([["AS1"], ["AS2"], ["Other"], ["AS1"], ["Other"], []], [1, 1, 1, 2, 2, 3], false);
    expect(c[3]).toBe(c[0]);
    expect(c[1]).not.toBe(c[0]);
    expect(c[2]).toMatch(/^#[7-9a][0-9a-f]/); // a grey
    expect(new Set(c).size).toBe(5); // AS1 twice
  });
});

test("gridLayout fills the width with cells of at least 260 px", () => {
  expect(gridLayout(1, 900)).toEqual({ cols: 1, rows: 1 });
  expect(gridLayout(5, 900)).toEqual({ cols: 3, rows: 2 });
  expect(gridLayout(10, 1200)).toEqual({ cols: 4, rows: 3 });
  expect(gridLayout(10, 500)).toEqual({ cols: 1, rows: 10 });
});

test("timeSeriesOption draws the reverse direction below zero and the previous period dashed", () => {
  const line: LineResponse = {
    table: "flows_1m",
    interval: 60,
    sql: "",
    t: ["2026-11-26T10:00:00Z", "2026-11-26T10:01:00Z"],
    rows: [["AS1"], ["AS1"], []],
    axis: [1, 2, 3],
    points: [
      [10, 20],
      [3, 4],
      [25, 25],
    ],
    min: [10, 3, 25],
    max: [20, 4, 25],
    avg: [15, 3.5, 25],
    p95: [20, 4, 25],
    last: [20, 4, 25],
    total: [0, 0, 0],
    axisNames: { "1": "Direct", "2": "Reverse", "3": "Previous day" },
  };
  const o = timeSeriesOption(line, "stacked", { dark: false, rateBase: "bits", timeZone: "utc", units: "l3bps" }, line.axisNames) as {
    series: { name: string; data: [number, number][]; stack?: string; lineStyle: { type: string } }[];
  };
  expect(o.series.map((s) => s.name)).toEqual(["AS1", "AS1 (reverse)", "Previous day"]);
  expect(o.series[1].data.map((d) => d[1])).toEqual([-3, -4]);
  expect(o.series[0].stack).not.toBe(o.series[1].stack);
  expect(o.series[2].stack).toBeUndefined();
  expect(o.series[2].lineStyle.type).toBe("dashed");
  expect(o.series[0].data[0][0]).toBe(Date.parse("2026-11-26T10:00:00Z"));
});
