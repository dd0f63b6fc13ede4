// What the server tells once per page load: its query configuration (columns, tables,
// limits) and who the user is. Pages wait on ready().
import { computed, reactive } from "vue";
import { api, ApiError } from "@/api/client";
import type { Column, QueryConfig, User } from "@/api/types";

export const server = reactive<{
  config: QueryConfig | null;
  user: User | null;
  error: string | null;
}>({ config: null, user: null, error: null });

let loading: Promise<void> | null = null;

// ready loads the configuration and the user (once; again after a failure).
export function ready(): Promise<void> {
  if (loading) return loading;
  loading = (async () => {
    try {
      const [config, user] = await Promise.all([api.config(), api.user().catch(() => null)]);
      server.config = normalizeConfig(config.data);
      server.user = user?.data ?? null;
      server.error = null;
    } catch (err) {
      server.error = err instanceof ApiError ? err.message : String(err);
      loading = null;
      throw err;
    }
  })();
  return loading;
}

// normalizeConfig fills what an older server may leave out.
function normalizeConfig(c: QueryConfig): QueryConfig {
  return {
    ...c,
    defaultFilter: c.defaultFilter ?? "",
    dimensionsLimit: c.dimensionsLimit || 50,
    points: c.points || 200,
    columns: (c.columns ?? []).map((col) => ({ ...col, values: col.values ?? [] })),
    tables: c.tables ?? [],
    units: c.units ?? ["l3bps", "l2bps", "pps", "fps", "inl2%", "outl2%"],
  };
}

export const columns = computed<Column[]>(() => server.config?.columns ?? []);
export const dimensionColumns = computed(() => columns.value.filter((c) => c.dimension));
export const columnByName = computed(() => new Map(columns.value.map((c) => [c.name.toLowerCase(), c])));

// hasColumn tells if the server has a column enabled.
export function hasColumn(name: string): boolean {
  return columnByName.value.has(name.toLowerCase());
}

// The reverse of a dimension for the other direction (SrcAS ↔ DstAS, InIfName ↔ OutIfName),
// kept when the server has no such column.
export function reverseDimension(name: string): string {
  for (const [from, to] of [
    ["Src", "Dst"],
    ["Dst", "Src"],
    ["In", "Out"],
    ["Out", "In"],
  ]) {
    if (name.startsWith(from)) {
      const candidate = to + name.slice(from.length);
      return hasColumn(candidate) ? candidate : name;
    }
  }
  return name;
}
