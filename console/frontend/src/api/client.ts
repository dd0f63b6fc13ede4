// The one module that talks to the server. Pages call these typed functions; the routes,
// methods, headers and error format of docs/api.md are written here only.
import type {
  ExportersResponse,
  ExportersWidget,
  FilterCompletions,
  FilterValidation,
  FlowRateWidget,
  FlowsRequest,
  FlowsResponse,
  LastFlowWidget,
  LineRequest,
  LineResponse,
  NewView,
  QueryConfig,
  SankeyRequest,
  SankeyResponse,
  SavedView,
  TableRequest,
  TableResponse,
  TopWidget,
  User,
  ViewsResponse,
} from "./types";

// Requests that change state carry this header (docs/api.md): a page of another origin
// cannot send it without a CORS preflight, which the server never grants.
const requestHeader = { "X-Flowzero-Request": "1" };

// ApiError is a failed request: the HTTP status and the server's message, with the
// position of a filter error and the delay a 429 asks for.
export class ApiError extends Error {
  readonly status: number;
  readonly position?: { offset: number; line: number; column: number };
  readonly retryAfter?: number;

  constructor(status: number, message: string, extra?: { position?: ApiError["position"]; retryAfter?: number }) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.position = extra?.position;
    this.retryAfter = extra?.retryAfter;
  }
}

// Answer is a decoded body with what the query headers say: the SQL that ran and the
// table chosen.
export interface Answer<T> {
  data: T;
  sql?: string;
  table?: string;
}

async function call<T>(method: string, path: string, body?: unknown, signal?: AbortSignal, state = false): Promise<Answer<T>> {
  const headers: Record<string, string> = { Accept: "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (state) Object.assign(headers, requestHeader);
  let response: Response;
  try {
    response = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
      credentials: "same-origin",
    });
  } catch (err) {
    if (err instanceof DOMException && err.name === "AbortError") throw err;
    throw new ApiError(0, `cannot reach the server: ${(err as Error).message}`);
  }
  const text = await response.text();
  let decoded: unknown = undefined;
  if (text !== "") {
    try {
      decoded = JSON.parse(text);
    } catch {
      decoded = undefined;
    }
  }
  if (!response.ok) {
    const obj = (decoded ?? {}) as { message?: string; error?: string; position?: ApiError["position"] };
    const message = obj.message ?? obj.error ?? (text.trim() || response.statusText || `HTTP ${response.status}`);
    const retry = Number(response.headers.get("Retry-After"));
    throw new ApiError(response.status, message, {
      position: obj.position,
      retryAfter: Number.isFinite(retry) && retry > 0 ? retry : undefined,
    });
  }
  if (decoded === undefined) {
    throw new ApiError(response.status, `${method} ${path}: the answer is not JSON`);
  }
  return {
    data: decoded as T,
    sql: response.headers.get("X-SQL-Query") ?? undefined,
    table: response.headers.get("X-Flowzero-Table") ?? undefined,
  };
}

const q = "/api/v0/query";

export const api = {
  config: (signal?: AbortSignal) => call<QueryConfig>("GET", `${q}/config`, undefined, signal),
  line: (body: LineRequest, signal?: AbortSignal) => call<LineResponse>("POST", `${q}/line`, body, signal),
  sankey: (body: SankeyRequest, signal?: AbortSignal) => call<SankeyResponse>("POST", `${q}/sankey`, body, signal),
  table: (body: TableRequest, signal?: AbortSignal) => call<TableResponse>("POST", `${q}/table`, body, signal),
  flows: (body: FlowsRequest, signal?: AbortSignal) => call<FlowsResponse>("POST", `${q}/flows`, body, signal),
  validateFilter: (filter: string, signal?: AbortSignal) =>
    call<FilterValidation>("POST", `${q}/filter/validate`, { filter }, signal),
  completeFilter: (filter: string, offset: number, signal?: AbortSignal) =>
    call<FilterCompletions>("POST", `${q}/filter/complete`, { filter, offset }, signal),

  widgets: {
    flowRate: (signal?: AbortSignal) => call<FlowRateWidget>("GET", `${q}/widgets/flow-rate`, undefined, signal),
    exporters: (signal?: AbortSignal) => call<ExportersWidget>("GET", `${q}/widgets/exporters`, undefined, signal),
    lastFlow: (signal?: AbortSignal) => call<LastFlowWidget>("GET", `${q}/widgets/last-flow`, undefined, signal),
    top: (dimension: string, filter: string, signal?: AbortSignal) =>
      call<TopWidget>("GET", `${q}/widgets/top?${new URLSearchParams({ dimension, filter })}`, undefined, signal),
    graph: (points: number, filter: string, signal?: AbortSignal) =>
      call<LineResponse>("GET", `${q}/widgets/graph?${new URLSearchParams({ points: String(points), filter })}`, undefined, signal),
  },

  exporters: (signal?: AbortSignal) => call<ExportersResponse>("GET", "/api/v0/exporters", undefined, signal),

  user: (signal?: AbortSignal) => call<User>("GET", "/api/v0/console/user", undefined, signal),
  views: {
    list: (signal?: AbortSignal) => call<ViewsResponse>("GET", "/api/v0/console/views", undefined, signal),
    get: (id: string, signal?: AbortSignal) =>
      call<SavedView>("GET", `/api/v0/console/views/${encodeURIComponent(id)}`, undefined, signal),
    create: (view: NewView) => call<SavedView>("POST", "/api/v0/console/views", view, undefined, true),
    remove: (id: string) =>
      call<{ deleted: string }>("DELETE", `/api/v0/console/views/${encodeURIComponent(id)}`, undefined, undefined, true),
  },
};

// isAbort tells a request cancelled on purpose (a newer one replaced it) from a failure.
export function isAbort(err: unknown): boolean {
  return err instanceof DOMException && err.name === "AbortError";
}
