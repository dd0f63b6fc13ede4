// User Timing marks of the console's milestones, visible in the browser's performance panel
// and read by the end-to-end test (console/e2e) to measure what a user waits for: Home with
// every widget drawn, and a Visualize query from the request to the chart drawn. Only the
// latest mark of each name is kept, so that a page left open does not grow the buffer.
import { nextTick } from "vue";

export const timing = {
  // homeLoaded: every widget of Home has its first answer drawn (startTime: since the
  // navigation started).
  homeLoaded: "flowzero:home-loaded",
  // visualizeQuery: Visualize sent a query; visualizeRendered: its chart was drawn;
  // the measure visualize is the time between them.
  visualizeQuery: "flowzero:visualize-query",
  visualizeRendered: "flowzero:visualize-rendered",
  visualize: "flowzero:visualize",
} as const;

export function mark(name: string): void {
  if (typeof performance === "undefined" || !performance.mark) return;
  performance.clearMarks(name);
  performance.mark(name);
}

// measureFrom marks end and records the time since the mark start as the measure name,
// once: start is cleared, so that a chart drawn again (a resize, the theme) measures nothing.
export function measureFrom(start: string, end: string, name: string): void {
  if (typeof performance === "undefined" || !performance.measure) return;
  if (performance.getEntriesByName(start, "mark").length === 0) return;
  mark(end);
  performance.clearMeasures(name);
  performance.measure(name, start, end);
  performance.clearMarks(start);
}

// afterPaint resolves once Vue has updated the DOM and the browser has drawn a frame with
// it (ECharts draws its canvases in an animation frame after setOption).
export async function afterPaint(): Promise<void> {
  await nextTick();
  await new Promise<void>((resolve) => requestAnimationFrame(() => requestAnimationFrame(() => resolve())));
}
