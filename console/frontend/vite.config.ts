/// <reference types="vitest/config" />
import { fileURLToPath, URL } from "node:url";
import { realpathSync } from "node:fs";
import { defineConfig, type PluginOption } from "vite";
import vue from "@vitejs/plugin-vue";
import tailwindcss from "@tailwindcss/vite";

// Development servers (npm run dev, npm run preview) answer /api either from a running
// collector (FLOWZERO_API=http://127.0.0.1:8080) or, without it, from the fixtures of
// dev/fakeapi.ts. Neither is part of the build: `make` only runs `vite build`.
export default defineConfig(async ({ command }) => {
  const api = process.env.FLOWZERO_API;
  const plugins: PluginOption[] = [vue(), tailwindcss()];
  if (command === "serve" && !api && !process.env.VITEST) {
    const { fakeAPI } = await import("./dev/fakeapi.ts");
    plugins.push(fakeAPI());
  }
  const proxy = api ? { "/api": { target: api, changeOrigin: true } } : undefined;
  return {
    plugins,
    resolve: {
      alias: { "@": fileURLToPath(new URL("./src", import.meta.url)) },
    },
    build: {
      // The Go package embeds ../dist; make empties it first (keeping its .gitkeep).
      outDir: "../dist",
      emptyOutDir: false,
      assetsDir: "assets",
      chunkSizeWarningLimit: 1200,
      rolldownOptions: {
        output: {
          // Libraries in chunks of their own: they change less often than the pages, so
          // browsers keep them cached across upgrades, and a page loads only what it uses.
          codeSplitting: {
            groups: [
              { name: "echarts", test: /node_modules[\\/](echarts|zrender|vue-echarts)[\\/]/ },
              { name: "codemirror", test: /node_modules[\\/](@codemirror|@lezer|@marijn|crelt|style-mod|w3c-keyname)[\\/]/ },
              { name: "vue", test: /node_modules[\\/](@vue|vue|vue-router)[\\/]/ },
            ],
          },
        },
      },
    },
    server: {
      host: "127.0.0.1",
      proxy,
      // node_modules is a link into the repository's .cache (scripts/install-deps.sh).
      fs: { allow: [".", realpathSync("node_modules")] },
    },
    preview: { host: "127.0.0.1", proxy },
    test: {
      include: ["src/**/*.test.ts"],
      environment: "node",
    },
  };
});
