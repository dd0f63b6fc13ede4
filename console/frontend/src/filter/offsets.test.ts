import { describe, expect, test } from "vitest";
import { byteOffset, charIndex } from "./offsets";

describe("UTF-8 offsets", () => {
  const cases = [
    "SrcAS = AS13335",
    "InIfDescription = 'café' AND DstAS = 1", // é: 2 bytes
    "ExporterName = '東京-1' OR Proto = TCP", // 3 bytes each
    "InIfDescription = '🚀 rocket' AND x", // a surrogate pair: 4 bytes
    "",
  ];
  test.each(cases)("%j: every index round-trips and agrees with TextEncoder", (text) => {
    const enc = new TextEncoder();
    for (let i = 0; i <= text.length; i++) {
      // Indexes inside a surrogate pair are not positions a cursor can take.
      const inPair = i > 0 && i < text.length && /[\uDC00-\uDFFF]/.test(text[i]);
      if (inPair) continue;
      const b = byteOffset(text, i);
      expect(b).toBe(enc.encode(text.slice(0, i)).length);
      expect(charIndex(text, b)).toBe(i);
    }
  });
  test("clamping and offsets inside a code point", () => {
    expect(charIndex("abc", 99)).toBe(3);
    expect(charIndex("é", 1)).toBe(0); // inside the 2 bytes of é
    expect(charIndex("a🚀b", 3)).toBe(1); // inside the 4 bytes of 🚀
    expect(byteOffset("a🚀b", 2)).toBe(1); // index 2 splits the pair
  });
});
