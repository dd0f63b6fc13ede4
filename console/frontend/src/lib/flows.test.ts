import { expect, test } from "vitest";
import { parseFlowTime } from "./flows";

test("parseFlowTime reads the forms a time column may take", () => {
  const want = Date.UTC(2026, 10, 26, 10, 58, 47);
  expect(parseFlowTime("2026-11-26T10:58:47Z")?.getTime()).toBe(want);
  expect(parseFlowTime("2026-11-26T10:58:47.123456789Z")?.getTime()).toBe(want + 123);
  expect(parseFlowTime("2026-11-26 10:58:47")?.getTime()).toBe(want); // ClickHouse's DateTime, UTC
  expect(parseFlowTime("2026-11-26T11:58:47+01:00")?.getTime()).toBe(want);
  expect(parseFlowTime(want / 1000)?.getTime()).toBe(want);
  expect(parseFlowTime("yesterday")).toBeNull();
  expect(parseFlowTime(null)).toBeNull();
});
