// Applies the saved theme (src/lib/theme.ts writes it) before the first paint.
(function () {
  var t = null;
  try { t = localStorage.getItem("flowzero.theme"); } catch (e) { /* storage disabled */ }
  var dark = t === "dark" || (t !== "light" && window.matchMedia("(prefers-color-scheme: dark)").matches);
  if (dark) document.documentElement.classList.add("dark");
})();
