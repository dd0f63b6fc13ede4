import { describe, expect, test } from "vitest";
import { formatCount, formatRate, formatSI, formatTotal, scaleSI } from "./units";

describe("formatSI", () => {
  test.each([
    [0, "bps", "0 bps"],
    [1, "bps", "1.00 bps"],
    [999, "bps", "999 bps"],
    [1000, "bps", "1.00 kbps"],
    [1234567, "bps", "1.23 Mbps"],
    [12_345_678_901, "bps", "12.3 Gbps"],
    [999_700, "bps", "1.00 Mbps"], // rounds up into the next prefix
    [999_499, "bps", "999 kbps"],
    [-2_500_000, "bps", "-2.50 Mbps"], // reverse direction, drawn below zero
    [4.2e18, "B", "4.20 EB"],
    [0.05, "fps", "0.0500 fps"],
  ])("%d %s", (value, unit, want) => {
    expect(formatSI(value, unit)).toBe(want);
  });

  test("trim drops trailing zeros for axis labels", () => {
    expect(formatSI(2e9, "bps", { trim: true })).toBe("2 Gbps");
    expect(formatSI(2.5e9, "bps", { trim: true })).toBe("2.5 Gbps");
    expect(formatSI(100, "bps", { trim: true })).toBe("100 bps");
  });

  test("missing values", () => {
    expect(formatSI(NaN, "bps")).toBe("–");
    expect(formatSI(null, "bps")).toBe("–");
    expect(formatSI(Infinity, "bps")).toBe("–");
  });

  test("scaleSI keeps the sign only for non-zero values", () => {
    expect(scaleSI(-0)).toEqual({ mantissa: "0", prefix: "" });
    expect(scaleSI(-1500)).toEqual({ mantissa: "-1.50", prefix: "k" });
  });
});

describe("formatRate", () => {
  test("bits or bytes per second", () => {
    expect(formatRate(8e9, "l3bps")).toBe("8.00 Gbps");
    expect(formatRate(8e9, "l3bps", "bytes")).toBe("1.00 GB/s");
    expect(formatRate(8e9, "l2bps", "bytes")).toBe("1.00 GB/s");
  });
  test("packets and flows are never divided", () => {
    expect(formatRate(8e6, "pps", "bytes")).toBe("8.00 Mpps");
    expect(formatRate(1234, "fps")).toBe("1.23 kfps");
  });
  test("shares of interface speed", () => {
    expect(formatRate(12.345, "inl2%")).toBe("12.3 %");
    expect(formatRate(100, "outl2%", "bits", { trim: true })).toBe("100 %");
    expect(formatRate(0.5, "inl2%")).toBe("0.500 %");
    expect(formatRate(1234.5, "inl2%")).toBe("1235 %"); // no prefix on a percentage
  });
});

describe("formatTotal", () => {
  test("the API's totals are bytes, packets and flows", () => {
    expect(formatTotal(1.5e12, "l3bps")).toBe("1.50 TB");
    expect(formatTotal(1.5e12, "l2bps")).toBe("1.50 TB");
    expect(formatTotal(2e9, "pps")).toBe("2.00 Gpkts");
    expect(formatTotal(42, "fps")).toBe("42.0 flows");
    expect(formatTotal(37.5, "inl2%")).toBe("37.5 %");
  });
});

test("formatCount", () => {
  expect(formatCount(1234567)).toBe("1,234,567");
  expect(formatCount(0)).toBe("0");
  expect(formatCount(undefined)).toBe("–");
});
