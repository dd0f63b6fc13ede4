import { expect, test } from "vitest";
import { escapeHTML } from "./html";

test("escapeHTML", () => {
  expect(escapeHTML(`transit: <img src=x onerror="alert('x')"> & co`)).toBe(
    "transit: &lt;img src=x onerror=&quot;alert(&#39;x&#39;)&quot;&gt; &amp; co",
  );
  expect(escapeHTML(42)).toBe("42");
});
