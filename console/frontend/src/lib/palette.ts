// Series colours: ten hues that stay apart for most colour vision deficiencies, a shade for
// each theme, and greys for "Other" (what the limit folded), which must not look like a
// series of its own.
const light = ["#2563eb", "#ea580c", "#0891b2", "#65a30d", "#c026d3", "#dc2626", "#0d9488", "#ca8a04", "#7c3aed", "#db2777"];
const dark = ["#60a5fa", "#fb923c", "#22d3ee", "#a3e635", "#e879f9", "#f87171", "#2dd4bf", "#facc15", "#a78bfa", "#f472b6"];
const greyLight = ["#94a3b8", "#a8b3c4", "#7f8ea3"];
const greyDark = ["#64748b", "#526077", "#75849a"];

export function seriesColor(index: number, isDark: boolean): string {
  const p = isDark ? dark : light;
  return p[((index % p.length) + p.length) % p.length];
}

export function otherColor(index: number, isDark: boolean): string {
  const p = isDark ? greyDark : greyLight;
  return p[index % p.length];
}

// isOther tells the row the limit folded.
export function isOther(row: string[]): boolean {
  return row.length > 0 && row.every((v) => v === "Other");
}

// rowName is a series' label: its dimension values, or "Total" without dimensions.
export function rowName(row: string[]): string {
  return row.length === 0 ? "Total" : row.join(" · ");
}

// Colours of the charts' frame per theme.
export function chartColors(isDark: boolean) {
  return isDark
    ? { text: "#cbd5e1", muted: "#94a3b8", axis: "#334155", split: "#1e293b", tooltipBg: "#0f172aee", tooltipBorder: "#334155" }
    : { text: "#334155", muted: "#64748b", axis: "#cbd5e1", split: "#eef2f7", tooltipBg: "#ffffffee", tooltipBorder: "#e2e8f0" };
}
