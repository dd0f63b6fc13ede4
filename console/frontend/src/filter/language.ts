// The filter language for CodeMirror: highlighting by a stream tokenizer (the server parses;
// this only colours), completion from POST filter/complete, errors from POST filter/validate
// at the position the server gives, as the user types.
import { StreamLanguage, HighlightStyle, syntaxHighlighting, type StringStream } from "@codemirror/language";
import { tags as t } from "@lezer/highlight";
import { autocompletion, type CompletionContext, type CompletionResult, type Completion as CMCompletion } from "@codemirror/autocomplete";
import { linter, type Diagnostic } from "@codemirror/lint";
import type { EditorView } from "@codemirror/view";
import { api, isAbort } from "@/api/client";
import { byteOffset, charIndex } from "./offsets";

const keywords = new Set(["AND", "OR", "NOT", "IN", "NOTIN", "LIKE", "UNLIKE", "ILIKE", "IUNLIKE"]);

interface TokenState {
  inComment: boolean;
}

// filterLanguage colours the filter; isColumn tells the known column names.
export function filterLanguage(isColumn: (name: string) => boolean) {
  return StreamLanguage.define<TokenState>({
    name: "flowzero-filter",
    startState: () => ({ inComment: false }),
    token(stream: StringStream, state: TokenState): string | null {
      if (state.inComment) {
        if (stream.skipTo("*/")) {
          stream.pos += 2;
          state.inComment = false;
        } else stream.skipToEnd();
        return "blockComment";
      }
      if (stream.eatSpace()) return null;
      if (stream.match("--")) {
        stream.skipToEnd();
        return "lineComment";
      }
      if (stream.match("/*")) {
        state.inComment = true;
        return "blockComment";
      }
      const ch = stream.peek();
      if (ch === "'" || ch === '"') {
        stream.next();
        let escaped = false;
        let c: string | void;
        while ((c = stream.next()) !== undefined) {
          if (c === ch && !escaped) break;
          escaped = !escaped && c === "\\";
        }
        return "string";
      }
      if (stream.match(/^(<<|!<<|<=|>=|!=|=|<|>)/)) return "compareOperator";
      if (ch === "(" || ch === ")") {
        stream.next();
        return "paren";
      }
      if (ch === ",") {
        stream.next();
        return "separator";
      }
      // Addresses, prefixes, numbers, AS numbers: a run without spaces or punctuation.
      if (stream.match(/^AS\d+\b/i)) return "number";
      if (stream.match(/^[0-9a-fA-F]*[:.][0-9a-fA-F:./]+/) || stream.match(/^\d+(\.\d+)?[kMG]?\b/)) return "number";
      if (stream.match(/^[A-Za-z_][A-Za-z0-9_]*/)) {
        const word = stream.current();
        if (keywords.has(word.toUpperCase())) return "keyword";
        return isColumn(word) ? "variableName" : "name";
      }
      stream.next();
      return null;
    },
    languageData: { commentTokens: { line: "--", block: { open: "/*", close: "*/" } } },
  });
}

// Colours for both themes (CSS variables set by FilterEditor.vue).
export const filterHighlight = syntaxHighlighting(
  HighlightStyle.define([
    { tag: t.keyword, color: "var(--cm-keyword)", fontWeight: "600" },
    { tag: t.variableName, color: "var(--cm-column)" },
    { tag: t.string, color: "var(--cm-string)" },
    { tag: t.number, color: "var(--cm-number)" },
    { tag: t.compareOperator, color: "var(--cm-operator)", fontWeight: "600" },
    { tag: [t.lineComment, t.blockComment], color: "var(--cm-comment)", fontStyle: "italic" },
    { tag: t.name, color: "var(--cm-unknown)" },
  ]),
);

const kindType: Record<string, string> = { column: "variable", operator: "keyword", value: "constant", keyword: "keyword" };

// completionSource asks the server what may come at the cursor. A newer keystroke aborts
// the request of the previous one.
async function completionSource(ctx: CompletionContext): Promise<CompletionResult | null> {
  const text = ctx.state.doc.toString();
  const word = ctx.matchBefore(/[\w.:/'"-]*/);
  if (!ctx.explicit && (!word || word.from === word.to)) {
    // Open by itself after a space following a column or an operator, or on a word.
    const before = text.slice(0, ctx.pos);
    if (!/\S\s$/.test(before) && before.trim() !== "") return null;
  }
  const controller = new AbortController();
  ctx.addEventListener("abort", () => controller.abort());
  try {
    const { data } = await api.completeFilter(text, byteOffset(text, ctx.pos), controller.signal);
    if (!data.completions?.length) return null;
    const options: CMCompletion[] = data.completions.map((c, i) => ({
      label: c.label,
      apply: c.apply ?? c.label,
      detail: c.detail,
      type: kindType[c.kind] ?? "text",
      boost: -i / 1000, // keep the server's order
    }));
    return { from: charIndex(text, data.from), to: charIndex(text, data.to), options, filter: false };
  } catch (err) {
    if (!isAbort(err)) console.warn("filter completion:", err);
    return null;
  }
}

export const filterCompletion = autocompletion({
  override: [completionSource],
  activateOnTyping: true,
  closeOnBlur: true,
  icons: false,
  maxRenderedOptions: 200,
});

export interface Validity {
  valid: boolean;
  message?: string;
  line?: number;
  column?: number;
  // pending while the server has not answered for the current text.
  pending?: boolean;
}

// filterLinter checks the filter on the server after each pause in typing; onResult gets
// the verdict for the form (the Apply button waits for a valid filter).
export function filterLinter(onResult: (v: Validity) => void) {
  let controller: AbortController | null = null;
  return linter(
    async (view: EditorView): Promise<Diagnostic[]> => {
      const text = view.state.doc.toString();
      controller?.abort();
      controller = new AbortController();
      try {
        const { data } = await api.validateFilter(text, controller.signal);
        if (view.state.doc.toString() !== text) return [];
        if (data.valid) {
          onResult({ valid: true });
          return [];
        }
        const from = Math.min(charIndex(text, data.position?.offset ?? 0), text.length);
        // Underline the word at the position (at least one character, or the end).
        const rest = text.slice(from);
        const len = Math.max(1, /^[^\s()]*/.exec(rest)?.[0].length ?? 1);
        const to = Math.min(text.length, from + len);
        onResult({ valid: false, message: data.message, line: data.position?.line, column: data.position?.column });
        return [{ from: from === text.length && from > 0 ? from - 1 : from, to: Math.max(to, from), severity: "error", message: data.message }];
      } catch (err) {
        if (!isAbort(err)) onResult({ valid: true, message: `cannot check the filter: ${(err as Error).message}` });
        return [];
      }
    },
    { delay: 250 },
  );
}
