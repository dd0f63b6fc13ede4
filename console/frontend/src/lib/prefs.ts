// Preferences of this browser (not of the URL, not of a view): theme, time zone of the
// times shown, bits or bytes for rates. Kept in localStorage.
import { reactive, watch } from "vue";
import type { RateBase } from "./units";
import type { TimeZonePref } from "./time";

export type ThemePref = "auto" | "light" | "dark";

export interface Prefs {
  theme: ThemePref;
  timeZone: TimeZonePref;
  rateBase: RateBase;
  // The filter of the home page's graph and pies; null: the server's default.
  homeFilter: string | null;
}

const storageKey = (k: string) => `flowzero.${k}`;

function load<T extends string>(key: string, allowed: readonly T[], fallback: T): T {
  try {
    const v = localStorage.getItem(storageKey(key));
    return v !== null && (allowed as readonly string[]).includes(v) ? (v as T) : fallback;
  } catch {
    return fallback;
  }
}

function loadText(key: string): string | null {
  try {
    return localStorage.getItem(storageKey(key));
  } catch {
    return null;
  }
}

function save(key: string, value: string | null) {
  try {
    if (value === null) localStorage.removeItem(storageKey(key));
    else localStorage.setItem(storageKey(key), value);
  } catch {
    // Private windows may refuse storage: the preference lasts for the page.
  }
}

export const prefs = reactive<Prefs>({
  theme: load("theme", ["auto", "light", "dark"] as const, "auto"),
  timeZone: load("timeZone", ["local", "utc"] as const, "local"),
  rateBase: load("rateBase", ["bits", "bytes"] as const, "bits"),
  homeFilter: loadText("homeFilter"),
});

const darkQuery = typeof window !== "undefined" ? window.matchMedia("(prefers-color-scheme: dark)") : null;

// isDark is the theme in effect.
export const theme = reactive({ dark: false });

function applyTheme() {
  const dark = prefs.theme === "dark" || (prefs.theme === "auto" && !!darkQuery?.matches);
  theme.dark = dark;
  document.documentElement.classList.toggle("dark", dark);
}

export function startPrefs() {
  applyTheme();
  darkQuery?.addEventListener("change", applyTheme);
  watch(
    () => prefs.theme,
    (t) => {
      save("theme", t === "auto" ? null : t);
      applyTheme();
    },
  );
  watch(
    () => prefs.timeZone,
    (z) => save("timeZone", z),
  );
  watch(
    () => prefs.rateBase,
    (b) => save("rateBase", b),
  );
  watch(
    () => prefs.homeFilter,
    (f) => save("homeFilter", f),
  );
}
