// Development helper: opens console pages in headless Chromium (Debian's /usr/bin/chromium,
// or $CHROMIUM) at 1280×800 in light and dark mode, types into the filter editor where a
// scenario says so, saves PNGs and fails on any console error, uncaught exception or CSP
// violation. It speaks the DevTools protocol over Node's WebSocket (Node 22, or Node 20 with
// --experimental-websocket), so it needs no npm package.
//
//   node --experimental-websocket dev/screenshots.mjs http://127.0.0.1:5173 OUTDIR [NAME...]
//
// The browser tests of the collector with real data (phase B of issue 23) are Go tests.
import { spawn } from "node:child_process";
import { mkdirSync, writeFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const [base = "http://127.0.0.1:5173", out = "screenshots", ...only] = process.argv.slice(2);
const chromium = process.env.CHROMIUM ?? "/usr/bin/chromium";

// Each scenario: a path, and steps run once the page has settled.
const scenarios = [
  { name: "home", path: "/" },
  { name: "visualize-stacked", path: "/visualize?v=1&dimensions=SrcAS,ExporterName&previous-period=true&filter=InIfBoundary+=+external" },
  { name: "visualize-lines-bidirectional", path: "/visualize?v=1&graph=lines&start=24+hours+ago&dimensions=SrcAS&limit=5&bidirectional=true" },
  { name: "visualize-stacked100", path: "/visualize?v=1&graph=stacked100&dimensions=Proto&units=pps" },
  { name: "visualize-grid", path: "/visualize?v=1&graph=grid&dimensions=ExporterName&bidirectional=true" },
  { name: "visualize-sankey", path: "/visualize?v=1&graph=sankey&dimensions=SrcAS,InIfProvider,ExporterName&filter=InIfBoundary+=+external" },
  { name: "visualize-heatmap", path: "/visualize?v=1&graph=heatmap&start=2+days+ago&dimensions=SrcAS,Proto&limit=15" },
  {
    name: "visualize-filter-completion",
    path: "/visualize?v=1&dimensions=SrcAS",
    steps: [{ click: ".filter-editor .cm-content" }, { selectAll: true }, { type: "InIfBoundary = external AND Src" }, { wait: 1500 }],
  },
  {
    name: "visualize-filter-error",
    path: "/visualize?v=1&dimensions=SrcAS",
    steps: [{ click: ".filter-editor .cm-content" }, { selectAll: true }, { type: "SrcAddr = 192.0.2.300 AND Proto = TCP" }, { key: "Escape" }, { wait: 1500 }],
  },
  {
    name: "visualize-save-view",
    path: "/visualize?v=1&graph=sankey&dimensions=SrcAS,InIfProvider&filter=InIfBoundary+=+external",
    steps: [{ click: 'button[title="Save these settings under a name"]' }, { wait: 500 }, { type: "Transit providers by source AS" }, { wait: 300 }],
  },
  {
    name: "visualize-saved",
    path: "/visualize?v=1&graph=sankey&dimensions=SrcAS,InIfProvider&filter=InIfBoundary+=+external",
    steps: [{ click: 'button[title="Save these settings under a name"]' }, { wait: 500 }, { type: "Transit providers by source AS" }, { key: "Enter" }, { wait: 1500 }],
  },
  {
    name: "visualize-brush-zoom",
    path: "/visualize?v=1&dimensions=SrcAS&limit=5",
    steps: [{ drag: [500, 300, 760, 300] }, { wait: 2000 }],
  },
  {
    name: "visualize-table-hover",
    path: "/visualize?v=1&graph=lines&dimensions=SrcAS&limit=5",
    steps: [{ scroll: 300 }, { hover: "table tbody tr:nth-child(2)" }, { wait: 800 }],
  },
  { name: "navigate-away", path: "/visualize?v=1&dimensions=SrcAS", steps: [{ click: 'header a[href="/flows"]' }, { wait: 2000 }, { eval: "location.pathname" }] },
  { name: "flows", path: "/flows" },
  { name: "flows-live", path: "/flows?columns=TimeReceived,ExporterName,SrcAddr,DstAddr,Proto,DstPort,Bytes,Packets", steps: [{ click: 'button[title="Show flows as they arrive"]' }, { wait: 5000 }] },
  { name: "exporters", path: "/exporters?exporter=192.0.2.1" },
  { name: "views", path: "/views" },
  { name: "not-found", path: "/nowhere" },
];

async function launch() {
  const profile = mkdtempSync(join(tmpdir(), "flowzero-shots-"));
  const proc = spawn(
    chromium,
    ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--hide-scrollbars", "--remote-debugging-port=0", `--user-data-dir=${profile}`, "about:blank"],
    { stdio: ["ignore", "ignore", "pipe"] },
  );
  const ws = await new Promise((resolve, reject) => {
    let buf = "";
    proc.stderr.on("data", (d) => {
      buf += d;
      const m = /DevTools listening on (ws:\/\/\S+)/.exec(buf);
      if (m) resolve(m[1]);
    });
    proc.on("exit", (code) => reject(new Error(`chromium exited (${code}): ${buf}`)));
  });
  return { proc, ws, profile };
}

function connect(url) {
  const sock = new WebSocket(url);
  let id = 0;
  const pending = new Map();
  const listeners = [];
  sock.addEventListener("message", (ev) => {
    const msg = JSON.parse(ev.data);
    if (msg.id && pending.has(msg.id)) {
      const { resolve, reject } = pending.get(msg.id);
      pending.delete(msg.id);
      msg.error ? reject(new Error(msg.error.message)) : resolve(msg.result);
    } else listeners.forEach((l) => l(msg));
  });
  const ready = new Promise((r) => sock.addEventListener("open", r));
  return {
    ready,
    send: (method, params = {}, sessionId) =>
      new Promise((resolve, reject) => {
        const n = ++id;
        pending.set(n, { resolve, reject });
        sock.send(JSON.stringify({ id: n, method, params, sessionId }));
      }),
    on: (l) => listeners.push(l),
    close: () => sock.close(),
  };
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// locate waits up to 10 s for selector and returns where to point in it.
async function locate(s, selector, at) {
  for (let i = 0; i < 50; i++) {
    const { result } = await s("Runtime.evaluate", {
      expression: `(() => { const e = document.querySelector(${JSON.stringify(selector)}); if (!e) return null; const r = e.getBoundingClientRect(); return { x: r.x, y: r.y, width: r.width, height: r.height }; })()`,
      returnByValue: true,
    });
    if (result.value) return at(result.value);
    await sleep(200);
  }
  throw new Error(`no element ${selector}`);
}

async function shoot(cdp, scenario, dark) {
  const { targetId } = await cdp.send("Target.createTarget", { url: "about:blank" });
  const { sessionId } = await cdp.send("Target.attachToTarget", { targetId, flatten: true });
  const s = (m, p) => cdp.send(m, p, sessionId);
  const problems = [];
  cdp.on((msg) => {
    if (msg.sessionId !== sessionId) return;
    if (msg.method === "Runtime.exceptionThrown") problems.push(`exception: ${msg.params.exceptionDetails.exception?.description ?? msg.params.exceptionDetails.text}`);
    if (msg.method === "Runtime.consoleAPICalled" && msg.params.type === "error") problems.push(`console.error: ${msg.params.args.map((a) => a.value ?? a.description).join(" ")}`);
    if (msg.method === "Log.entryAdded" && msg.params.entry.level === "error") problems.push(`log: ${msg.params.entry.text} ${msg.params.entry.url ?? ""}`);
  });
  await s("Runtime.enable");
  await s("Log.enable");
  await s("Page.enable");
  await s("Emulation.setDeviceMetricsOverride", { width: 1280, height: 800, deviceScaleFactor: 1, mobile: false });
  await s("Emulation.setEmulatedMedia", { features: [{ name: "prefers-color-scheme", value: dark ? "dark" : "light" }] });
  await s("Page.navigate", { url: base + scenario.path });
  await sleep(2500);
  for (const step of scenario.steps ?? []) {
    if (step.click) {
      const [x, y] = await locate(s, step.click, (r) => [r.x + 10, r.y + 8]);
      await s("Input.dispatchMouseEvent", { type: "mousePressed", x, y, button: "left", clickCount: 1 });
      await s("Input.dispatchMouseEvent", { type: "mouseReleased", x, y, button: "left", clickCount: 1 });
    }
    if (step.drag) {
      const [x1, y1, x2, y2] = step.drag;
      await s("Input.dispatchMouseEvent", { type: "mouseMoved", x: x1, y: y1 });
      await s("Input.dispatchMouseEvent", { type: "mousePressed", x: x1, y: y1, button: "left", clickCount: 1 });
      for (let i = 1; i <= 10; i++) {
        await s("Input.dispatchMouseEvent", { type: "mouseMoved", x: x1 + ((x2 - x1) * i) / 10, y: y1 + ((y2 - y1) * i) / 10, button: "left", buttons: 1 });
        await sleep(20);
      }
      await s("Input.dispatchMouseEvent", { type: "mouseReleased", x: x2, y: y2, button: "left", clickCount: 1 });
    }
    if (step.scroll) {
      await s("Runtime.evaluate", { expression: `window.scrollBy(0, ${step.scroll})` });
      await sleep(300);
    }
    if (step.hover) {
      const [x, y] = await locate(s, step.hover, (r) => [r.x + r.width / 2, r.y + r.height / 2]);
      await s("Input.dispatchMouseEvent", { type: "mouseMoved", x, y });
    }
    if (step.selectAll) {
      await s("Input.dispatchKeyEvent", { type: "keyDown", key: "a", code: "KeyA", modifiers: 2, windowsVirtualKeyCode: 65 });
      await s("Input.dispatchKeyEvent", { type: "keyUp", key: "a", code: "KeyA", modifiers: 2, windowsVirtualKeyCode: 65 });
    }
    if (step.type) {
      for (const ch of step.type) {
        await s("Input.insertText", { text: ch });
        await sleep(30);
      }
    }
    if (step.key) {
      const code = { Escape: 27, Enter: 13 }[step.key] ?? 0;
      await s("Input.dispatchKeyEvent", { type: "keyDown", key: step.key, code: step.key, windowsVirtualKeyCode: code, ...(step.key === "Enter" ? { text: "\r" } : {}) });
      await s("Input.dispatchKeyEvent", { type: "keyUp", key: step.key, code: step.key, windowsVirtualKeyCode: code });
    }
    if (step.eval) {
      const { result } = await s("Runtime.evaluate", { expression: step.eval, returnByValue: true });
      console.log(`     ${step.eval} = ${JSON.stringify(result.value)}`);
    }
    if (step.wait) await sleep(step.wait);
  }
  await sleep(800);
  const { data } = await s("Page.captureScreenshot", { format: "png" });
  const file = join(out, `${scenario.name}-${dark ? "dark" : "light"}.png`);
  writeFileSync(file, Buffer.from(data, "base64"));
  await cdp.send("Target.closeTarget", { targetId });
  return { file, problems };
}

mkdirSync(out, { recursive: true });
const { proc, ws, profile } = await launch();
const cdp = connect(ws);
await cdp.ready;
let failed = 0;
try {
  for (const sc of scenarios.filter((x) => only.length === 0 || only.includes(x.name))) {
    for (const dark of [false, true]) {
      const { file, problems } = await shoot(cdp, sc, dark);
      console.log(`${problems.length ? "FAIL" : "ok  "} ${file}`);
      for (const p of problems) console.log(`     ${p}`);
      if (problems.length) failed++;
    }
  }
} finally {
  cdp.close();
  const exited = new Promise((r) => proc.on("exit", r));
  proc.kill();
  await exited;
  // Chromium's helper processes may still write to the profile for a moment.
  for (let i = 0; i < 10; i++) {
    try {
      rmSync(profile, { recursive: true, force: true });
      break;
    } catch {
      await sleep(300);
    }
  }
}
process.exit(failed ? 1 : 0);
