// escapeHTML makes text safe inside HTML: chart tooltips are HTML, and series names come
// from the flows (interface descriptions, AS names), which anyone upstream may write.
export function escapeHTML(s: unknown): string {
  return String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!);
}
