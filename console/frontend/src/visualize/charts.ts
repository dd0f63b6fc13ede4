// ECharts options for the Visualize graphs and the home widgets, from API answers. Pure
// functions of the data and the display settings, so that the components only wire events.
import type { EChartsCoreOption } from "echarts/core";
import type { Axis, LineResponse, SankeyResponse, Units } from "@/api/types";
import type { GraphType } from "@/state/visualize";
import { chartColors, isOther, otherColor, rowName, seriesColor } from "@/lib/palette";
import { formatRate, type RateBase } from "@/lib/units";
import { formatTime, type TimeZonePref } from "@/lib/time";
import { escapeHTML } from "@/lib/html";

export interface Display {
  dark: boolean;
  rateBase: RateBase;
  timeZone: TimeZonePref;
  units: Units;
}

// colorOf gives each series its colour: the same dimension values keep the same colour in
// the direct and reverse directions, "Other" is grey.
export function colorsOf(rows: string[][], axis: Axis[], dark: boolean): string[] {
  const index = new Map<string, number>();
  let others = 0;
  return rows.map((row, i) => {
    if (axis[i] === 3) return dark ? "#e2e8f0" : "#1e293b";
    if (isOther(row)) return otherColor(others++, dark);
    // The reverse direction has swapped dimensions but the same values: key on the values.
    const key = row.join("\u0000");
    if (!index.has(key)) index.set(key, index.size);
    return seriesColor(index.get(key)!, dark);
  });
}

// percentOfTotal turns each series into its share of the total at each time, per axis.
export function percentOfTotal(points: number[][], axis: Axis[]): number[][] {
  const n = points[0]?.length ?? 0;
  const totals = new Map<Axis, number[]>();
  points.forEach((p, i) => {
    if (axis[i] === 3) return;
    const t = totals.get(axis[i]) ?? new Array(n).fill(0);
    for (let j = 0; j < n; j++) t[j] += p[j] ?? 0;
    totals.set(axis[i], t);
  });
  return points.map((p, i) => {
    const t = totals.get(axis[i]);
    if (!t) return p.map(() => 0);
    return p.map((v, j) => (t[j] > 0 ? (100 * (v ?? 0)) / t[j] : 0));
  });
}

function axisLabel(d: Display, percent: boolean) {
  return (v: number) => (percent ? `${Math.abs(v).toFixed(0)} %` : formatRate(Math.abs(v), d.units, d.rateBase, { trim: true }));
}

function frame(d: Display) {
  const c = chartColors(d.dark);
  return {
    c,
    base: {
      backgroundColor: "transparent",
      useUTC: d.timeZone === "utc",
      animationDuration: 300,
      textStyle: { fontFamily: "inherit", color: c.text },
      tooltip: {
        confine: true,
        backgroundColor: c.tooltipBg,
        borderColor: c.tooltipBorder,
        textStyle: { color: c.text, fontSize: 12 },
        extraCssText: "box-shadow: 0 6px 20px rgb(0 0 0 / 0.15); border-radius: 6px;",
      },
    },
  };
}

function tooltipRows(params: { color: string; seriesName: string; value: [number, number]; seriesIndex: number }[], fmt: (v: number) => string, max = 14) {
  const rows = params
    .filter((p) => p.value && Math.abs(p.value[1]) > 0)
    .sort((a, b) => Math.abs(b.value[1]) - Math.abs(a.value[1]));
  const shown = rows.slice(0, max);
  return (
    shown
      .map(
        (p) =>
          `<div style="display:flex;gap:12px;justify-content:space-between;align-items:center"><span style="display:flex;align-items:center;gap:6px;max-width:320px;overflow:hidden;text-overflow:ellipsis;white-space:nowrap"><span style="display:inline-block;width:8px;height:8px;border-radius:2px;background:${p.color}"></span>${escapeHTML(p.seriesName)}</span><b style="font-variant-numeric:tabular-nums">${escapeHTML(fmt(p.value[1]))}</b></div>`,
      )
      .join("") + (rows.length > max ? `<div style="opacity:.6">and ${rows.length - max} more</div>` : "")
  );
}

// timeSeriesOption draws stacked areas, 100 % stacked areas or lines. The reverse direction
// (axis 2) is drawn below zero; the previous period (axis 3) as a dashed line.
export function timeSeriesOption(data: LineResponse, graph: GraphType, d: Display, axisNames: Record<string, string> = {}): EChartsCoreOption {
  const { c, base } = frame(d);
  const percent = graph === "stacked100";
  const values = percent ? percentOfTotal(data.points, data.axis) : data.points;
  const times = data.t.map((t) => Date.parse(t));
  const colors = colorsOf(data.rows, data.axis, d.dark);
  const stacked = graph === "stacked" || graph === "stacked100";
  const hasReverse = data.axis.includes(2);
  const fmt = (v: number) => (percent ? `${Math.abs(v).toFixed(1)} %` : formatRate(Math.abs(v), d.units, d.rateBase));
  const series = data.rows.map((row, i) => {
    const axis = data.axis[i];
    const sign = axis === 2 ? -1 : 1;
    const name = axis === 3 ? (axisNames["3"] ?? "Previous period") : axis === 2 ? `${rowName(row)} (reverse)` : rowName(row);
    return {
      type: "line",
      name,
      data: times.map((t, j) => [t, sign * (values[i][j] ?? 0)]),
      stack: stacked && axis !== 3 ? `axis${axis}` : undefined,
      areaStyle: stacked && axis !== 3 ? { opacity: d.dark ? 0.75 : 0.85 } : undefined,
      showSymbol: false,
      symbol: "none",
      sampling: "lttb",
      lineStyle: { width: stacked && axis !== 3 ? 0.6 : axis === 3 ? 1.5 : 1.6, type: axis === 3 ? "dashed" : "solid" },
      color: colors[i],
      z: axis === 3 ? 10 : 2,
      emphasis: { focus: "series" },
      blur: { areaStyle: { opacity: 0.15 }, lineStyle: { opacity: 0.2 } },
    };
  });
  return {
    ...base,
    grid: { left: 8, right: 16, top: 12, bottom: 8, containLabel: true },
    tooltip: {
      ...base.tooltip,
      trigger: "axis",
      axisPointer: { type: "line", lineStyle: { color: c.muted } },
      formatter: (params: never) => {
        const ps = params as unknown as { axisValue: number; color: string; seriesName: string; value: [number, number]; seriesIndex: number }[];
        if (!ps.length) return "";
        return `<div style="margin-bottom:4px;font-weight:600">${escapeHTML(formatTime(new Date(ps[0].axisValue), d.timeZone, false))}</div>${tooltipRows(ps, fmt)}`;
      },
    },
    xAxis: {
      type: "time",
      min: times[0],
      max: times[times.length - 1],
      axisLine: { lineStyle: { color: c.axis } },
      axisLabel: { color: c.muted, hideOverlap: true },
      splitLine: { show: false },
    },
    yAxis: {
      type: "value",
      max: percent && !hasReverse ? 100 : undefined,
      min: percent && hasReverse ? -100 : undefined,
      axisLabel: { color: c.muted, formatter: axisLabel(d, percent) },
      splitLine: { lineStyle: { color: c.split } },
    },
    brush: { xAxisIndex: 0, brushType: "lineX", brushMode: "single", transformable: false, throttleType: "debounce", throttleDelay: 100, brushStyle: { color: "rgba(8,145,178,0.15)", borderColor: "#0891b2" } },
    toolbox: { show: false },
    series,
  };
}

// gridLayout places n small charts in columns × rows filling width × height.
export function gridLayout(n: number, width: number): { cols: number; rows: number } {
  const maxCols = Math.max(1, Math.floor(width / 260));
  const cols = Math.max(1, Math.min(n, maxCols, Math.ceil(Math.sqrt(n * 1.6))));
  return { cols, rows: Math.ceil(n / cols) };
}

// gridOption draws one small chart per series of the direct direction (with its reverse
// below zero when asked), all on the same scale so that they compare.
export function gridOption(data: LineResponse, d: Display, width: number, cellHeight: number): { option: EChartsCoreOption; height: number } {
  const { c, base } = frame(d);
  const direct = data.rows.map((_, i) => i).filter((i) => data.axis[i] === 1);
  const reverseOf = new Map<string, number>();
  data.rows.forEach((row, i) => data.axis[i] === 2 && reverseOf.set(row.join("\u0000"), i));
  const colors = colorsOf(data.rows, data.axis, d.dark);
  const times = data.t.map((t) => Date.parse(t));
  const { cols, rows } = gridLayout(direct.length, width);
  const max = Math.max(0, ...direct.map((i) => data.max[i] ?? 0));
  const maxRev = Math.max(0, ...[...reverseOf.values()].map((i) => data.max[i] ?? 0));
  const grids: object[] = [];
  const xAxes: object[] = [];
  const yAxes: object[] = [];
  const series: object[] = [];
  const titles: object[] = [];
  const cellW = 100 / cols;
  const titleH = 22;
  direct.forEach((i, k) => {
    const col = k % cols;
    const row = Math.floor(k / cols);
    const top = row * cellHeight;
    grids.push({ left: `${col * cellW + 1}%`, width: `${cellW - 2}%`, top: top + titleH, height: cellHeight - titleH - 28, containLabel: false });
    xAxes.push({ type: "time", gridIndex: k, min: times[0], max: times[times.length - 1], axisLabel: { color: c.muted, fontSize: 10, hideOverlap: true }, axisLine: { lineStyle: { color: c.axis } }, splitNumber: 3 });
    yAxes.push({ type: "value", gridIndex: k, max, min: maxRev > 0 ? -maxRev : 0, axisLabel: { show: false }, splitLine: { lineStyle: { color: c.split } } });
    titles.push({ text: `${rowName(data.rows[i])}  ·  avg ${formatRate(data.avg[i], d.units, d.rateBase)}`, left: `${col * cellW + 1}%`, top, textStyle: { fontSize: 12, fontWeight: 600, color: c.text, width: (width * cellW) / 100 - 20, overflow: "truncate" } });
    series.push({ type: "line", name: rowName(data.rows[i]), xAxisIndex: k, yAxisIndex: k, data: times.map((t, j) => [t, data.points[i][j] ?? 0]), areaStyle: { opacity: 0.85 }, lineStyle: { width: 0.6 }, showSymbol: false, sampling: "lttb", color: colors[i] });
    const r = reverseOf.get(data.rows[i].join("\u0000"));
    if (r !== undefined) {
      series.push({ type: "line", name: `${rowName(data.rows[i])} (reverse)`, xAxisIndex: k, yAxisIndex: k, data: times.map((t, j) => [t, -(data.points[r][j] ?? 0)]), areaStyle: { opacity: 0.5 }, lineStyle: { width: 0.6 }, showSymbol: false, sampling: "lttb", color: colors[r] });
    }
  });
  const fmt = (v: number) => formatRate(Math.abs(v), d.units, d.rateBase);
  return {
    height: rows * cellHeight,
    option: {
      ...base,
      title: titles,
      grid: grids,
      xAxis: xAxes,
      yAxis: yAxes,
      series,
      tooltip: {
        ...base.tooltip,
        trigger: "axis",
        formatter: (params: never) => {
          const ps = params as unknown as { axisValue: number; color: string; seriesName: string; value: [number, number]; seriesIndex: number }[];
          if (!ps.length) return "";
          return `<div style="margin-bottom:4px;font-weight:600">${escapeHTML(formatTime(new Date(ps[0].axisValue), d.timeZone, false))}</div>${tooltipRows(ps, fmt)}`;
        },
      },
      axisPointer: { link: [{ xAxisIndex: "all" }] },
      brush: { xAxisIndex: "all", brushType: "lineX", brushMode: "single", transformable: false, brushStyle: { color: "rgba(8,145,178,0.15)", borderColor: "#0891b2" } },
      toolbox: { show: false },
    },
  };
}

// heatmapOption draws one row per series (Other left out: it would dwarf the rest), time
// across, colour for the value; the reverse direction in rows of its own.
export function heatmapOption(data: LineResponse, d: Display): { option: EChartsCoreOption; rows: number } {
  const { c, base } = frame(d);
  const idx = data.rows.map((_, i) => i).filter((i) => data.axis[i] !== 3 && !isOther(data.rows[i]));
  const names = idx.map((i) => (data.axis[i] === 2 ? `${rowName(data.rows[i])} (reverse)` : rowName(data.rows[i])));
  // Seconds shown when the cells are shorter than a minute.
  const times = data.t.map((t) => formatTime(new Date(t), d.timeZone, data.interval < 60));
  const cells: [number, number, number][] = [];
  let max = 0;
  // Rows top to bottom in the API's order (largest first): the category axis counts upward.
  idx.forEach((i, k) => {
    const y = idx.length - 1 - k;
    data.points[i].forEach((v, j) => {
      cells.push([j, y, v]);
      if (v > max) max = v;
    });
  });
  const yNames = [...names].reverse();
  const fmt = (v: number) => formatRate(v, d.units, d.rateBase);
  const magma = ["#fcfdbf", "#fec287", "#fb8761", "#e2466f", "#b5367a", "#822681", "#50127b", "#1f1147", "#000004"];
  return {
    rows: idx.length,
    option: {
      ...base,
      grid: { left: 8, right: 16, top: 8, bottom: 56, containLabel: true },
      tooltip: {
        ...base.tooltip,
        trigger: "item",
        formatter: (p: never) => {
          const { value } = p as unknown as { value: [number, number, number] };
          return `<div style="font-weight:600">${escapeHTML(yNames[value[1]])}</div><div>${escapeHTML(times[value[0]])}: <b>${escapeHTML(fmt(value[2]))}</b></div>`;
        },
      },
      xAxis: { type: "category", data: times, axisLabel: { color: c.muted, hideOverlap: true }, axisLine: { lineStyle: { color: c.axis } }, splitArea: { show: false } },
      yAxis: { type: "category", data: yNames, axisLabel: { color: c.text, width: 220, overflow: "truncate" }, axisLine: { lineStyle: { color: c.axis } } },
      visualMap: {
        min: 0,
        max: max || 1,
        calculable: true,
        orient: "horizontal",
        left: "center",
        bottom: 0,
        itemHeight: 240,
        itemWidth: 12,
        textStyle: { color: c.muted },
        formatter: (v: number) => formatRate(v, d.units, d.rateBase, { trim: true }),
        inRange: { color: d.dark ? [...magma].reverse() : magma },
      },
      series: [{ type: "heatmap", data: cells, progressive: 4000, emphasis: { itemStyle: { borderColor: c.text, borderWidth: 1 } } }],
    },
  };
}

// sankeyOption draws the flows between the values of consecutive dimensions.
export function sankeyOption(data: SankeyResponse, dimensions: string[], d: Display): EChartsCoreOption {
  const { c, base } = frame(d);
  const label = (node: string) => {
    const at = node.indexOf(": ");
    return at >= 0 ? node.slice(at + 2) : node;
  };
  const depthOf = (node: string) => Math.max(0, dimensions.findIndex((dim) => node.startsWith(`${dim}: `)));
  const colorIndex = new Map<string, number>();
  const fmt = (v: number) => formatRate(v, d.units, d.rateBase);
  return {
    ...base,
    tooltip: {
      ...base.tooltip,
      trigger: "item",
      formatter: (p: never) => {
        const x = p as unknown as { dataType: string; name: string; value: number; data: { source?: string; target?: string } };
        if (x.dataType === "edge") return `${escapeHTML(label(x.data.source!))} → ${escapeHTML(label(x.data.target!))}<br><b>${escapeHTML(fmt(x.value))}</b>`;
        return `<span style="opacity:.7">${escapeHTML(x.name.slice(0, x.name.indexOf(": ")))}</span><br>${escapeHTML(label(x.name))}: <b>${escapeHTML(fmt(x.value))}</b>`;
      },
    },
    series: [
      {
        type: "sankey",
        left: 8,
        right: 140,
        top: 12,
        bottom: 12,
        nodeGap: 6,
        nodeWidth: 14,
        layoutIterations: 48,
        draggable: false,
        emphasis: { focus: "adjacency" },
        lineStyle: { color: "gradient", opacity: d.dark ? 0.35 : 0.3, curveness: 0.5 },
        label: { color: c.text, fontSize: 12, formatter: (p: { name: string }) => label(p.name) },
        levels: dimensions.map((_, depth) => ({ depth, itemStyle: {} })),
        data: data.nodes.map((name) => {
          const other = label(name) === "Other";
          const depth = depthOf(name);
          if (!colorIndex.has(name)) colorIndex.set(name, colorIndex.size);
          return {
            name,
            depth,
            itemStyle: { color: other ? otherColor(0, d.dark) : seriesColor(colorIndex.get(name)!, d.dark), borderWidth: 0 },
          };
        }),
        links: data.links.map((l) => ({ ...l })),
      },
    ],
  };
}

// pieOption draws a top-N share widget of the home page.
export function pieOption(top: { name: string; percent: number }[], dark: boolean): EChartsCoreOption {
  const c = chartColors(dark);
  let others = 0;
  return {
    backgroundColor: "transparent",
    textStyle: { fontFamily: "inherit", color: c.text },
    tooltip: {
      trigger: "item",
      confine: true,
      backgroundColor: c.tooltipBg,
      borderColor: c.tooltipBorder,
      textStyle: { color: c.text, fontSize: 12 },
      formatter: (p: never) => {
        const x = p as unknown as { name: string; value: number };
        return `${escapeHTML(x.name)}: <b>${x.value.toFixed(1)} %</b>`;
      },
    },
    series: [
      {
        type: "pie",
        radius: ["48%", "80%"],
        center: ["50%", "50%"],
        avoidLabelOverlap: true,
        label: { show: false },
        itemStyle: { borderColor: dark ? "#0f172a" : "#fff", borderWidth: 1.5 },
        data: top.map((t, i) => ({ name: t.name || "(empty)", value: t.percent, itemStyle: { color: t.name === "Other" ? otherColor(others++, dark) : seriesColor(i, dark) } })),
      },
    ],
  };
}
