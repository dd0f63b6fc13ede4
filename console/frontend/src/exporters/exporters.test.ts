import { describe, expect, test } from "vitest";
import fixture from "../../dev/fixtures/exporters.json";
import type { ExporterStatus } from "@/api/types";
import { flowRates, protocols, samplingRates, templateCount } from "./exporters";

// The answer of GET /api/v0/exporters from `flowzero collect --demo` (its three exporters
// share 127.0.0.1: NetFlow v9, IPFIX and sFlow).
const demo = (fixture as { exporters: ExporterStatus[] }).exporters[0];

describe("the demo collector's exporter", () => {
  test("protocols", () => {
    expect(protocols(demo)).toEqual(["IPFIX", "NetFlow v9", "sFlow v5"]);
  });
  test("sampling rates from options records and sFlow data sources", () => {
    expect(samplingRates(demo)).toBe("1:1000");
  });
  test("templates: two data and one options template per session", () => {
    expect(templateCount(demo)).toBe("4 + 2 opt.");
  });
  test("rate averaged since first seen", () => {
    const r = flowRates([demo], null, 0).get("127.0.0.1")!;
    // 7770 flows between 10:58:32.432 and 10:58:47.333 (Date.parse keeps milliseconds).
    expect(r).toBeCloseTo(7770 / 14.901, 3);
  });
});

describe("flowRates", () => {
  const at = (flows: number): ExporterStatus => ({ ...demo, flows });
  test("the change between two answers", () => {
    const r = flowRates([at(8770)], { at: 1000, exporters: [at(7770)] }, 11_000);
    expect(r.get("127.0.0.1")).toBe(100);
  });
  test("a counter that went back (collector restarted) falls back to the average", () => {
    const r = flowRates([at(500)], { at: 1000, exporters: [at(7770)] }, 11_000);
    expect(r.get("127.0.0.1")).toBeCloseTo(500 / 14.901, 3);
  });
  test("nothing to say without time", () => {
    const e = { ...demo, "first-seen": demo["last-packet"] };
    expect(flowRates([e], null, 0).size).toBe(0);
  });
});

test("an exporter the decoders know nothing of", () => {
  const bare: ExporterStatus = { ...demo, decoder: undefined, "last-sampling-rate": 0 };
  expect(protocols(bare)).toEqual([]);
  expect(samplingRates(bare)).toBe("–");
  expect(templateCount(bare)).toBe("–");
  expect(samplingRates({ ...bare, "last-sampling-rate": 512 })).toBe("1:512");
});
