// Number formatting: SI prefixes (powers of 1000, as link speeds are counted), rates in
// bits or bytes per second, packets and flows per second, totals in bytes, packets and flows.
import type { Units } from "@/api/types";

const prefixes = ["", "k", "M", "G", "T", "P", "E"];

export interface FormatOptions {
  // digits is the number of significant digits (3: 1.23, 12.3, 123).
  digits?: number;
  // trim drops trailing zeros (axis labels: "2 Gbps" rather than "2.00 Gbps").
  trim?: boolean;
}

// scaleSI splits value into a mantissa below 1000 (after rounding to digits) and a prefix.
export function scaleSI(value: number, digits = 3): { mantissa: string; prefix: string } {
  const negative = value < 0;
  let abs = Math.abs(value);
  let idx = 0;
  while (abs >= 1000 && idx < prefixes.length - 1) {
    abs /= 1000;
    idx++;
  }
  let mantissa = abs === 0 ? "0" : abs.toPrecision(digits);
  // 999.7 rounds to "1.00e+3" at 3 digits: that is 1.00 of the next prefix.
  if (Number(mantissa) >= 1000 && idx < prefixes.length - 1) {
    idx++;
    mantissa = (Number(mantissa) / 1000).toPrecision(digits);
  }
  if (mantissa.includes("e")) mantissa = String(Number(mantissa));
  return { mantissa: (negative && abs !== 0 ? "-" : "") + mantissa, prefix: prefixes[idx] };
}

function trimZeros(s: string): string {
  return s.includes(".") ? s.replace(/\.?0+$/, "") : s;
}

// formatSI formats value with an SI prefix and a unit: formatSI(1234567, "bps") is "1.23 Mbps".
export function formatSI(value: number | null | undefined, unit = "", opts: FormatOptions = {}): string {
  if (value === null || value === undefined || !Number.isFinite(value)) return "–";
  const { mantissa, prefix } = scaleSI(value, opts.digits ?? 3);
  const m = opts.trim ? trimZeros(mantissa) : mantissa;
  const suffix = prefix + unit;
  return suffix ? `${m} ${suffix}` : m;
}

// Rate display preference: network engineers mostly count bits per second, storage people
// bytes per second. It applies to the bps units only.
export type RateBase = "bits" | "bytes";

// rateUnit is the unit label of a rate in units.
export function rateUnit(units: Units, base: RateBase = "bits"): string {
  switch (units) {
    case "l3bps":
    case "l2bps":
      return base === "bytes" ? "B/s" : "bps";
    case "pps":
      return "pps";
    case "fps":
      return "fps";
    case "inl2%":
    case "outl2%":
      return "%";
  }
}

// isPercent tells the units that are a share of interface speed.
export function isPercent(units: Units): boolean {
  return units === "inl2%" || units === "outl2%";
}

// formatRate formats a value the API gave in units (bits/s for the bps units).
export function formatRate(value: number | null | undefined, units: Units, base: RateBase = "bits", opts: FormatOptions = {}): string {
  if (value === null || value === undefined || !Number.isFinite(value)) return "–";
  if (isPercent(units)) {
    const digits = opts.digits ?? 3;
    const s = Math.abs(value) >= 1000 ? value.toFixed(0) : value.toPrecision(digits);
    return `${opts.trim ? trimZeros(s) : s} %`;
  }
  const v = base === "bytes" && (units === "l3bps" || units === "l2bps") ? value / 8 : value;
  return formatSI(v, rateUnit(units, base), opts);
}

// formatTotal formats the total of a series: bytes for the bit rates (the API sums bytes),
// packets for pps, flows for fps; % units get an average, formatted as a rate.
export function formatTotal(value: number | null | undefined, units: Units, opts: FormatOptions = {}): string {
  switch (units) {
    case "l3bps":
    case "l2bps":
      return formatSI(value, "B", opts);
    case "pps":
      return formatSI(value, "pkts", opts);
    case "fps":
      return formatSI(value, "flows", opts);
    default:
      return formatRate(value, units, "bits", opts);
  }
}

// unitsLabel names the units for a legend or an axis.
export const unitsLabels: Record<Units, string> = {
  l3bps: "L3 bits/s",
  l2bps: "L2 bits/s",
  pps: "packets/s",
  fps: "flows/s",
  "inl2%": "% of in. interface",
  "outl2%": "% of out. interface",
};

const integer = new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 });

// formatCount formats a counter exactly, with thousands separators: 1,234,567.
export function formatCount(value: number | null | undefined): string {
  if (value === null || value === undefined || !Number.isFinite(value)) return "–";
  return integer.format(value);
}

// formatBytes formats a byte count with SI prefixes (1.23 MB).
export function formatBytes(value: number | null | undefined): string {
  return formatSI(value, "B");
}
