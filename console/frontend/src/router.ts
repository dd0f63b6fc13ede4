import { ref } from "vue";
import { createRouter, createWebHistory } from "vue-router";

// The last Visualize URL of this tab: the navigation bar returns to it.
export const lastVisualize = ref("/visualize");

// Each page is a chunk of its own: the home page does not load the filter editor.
export const router = createRouter({
  history: createWebHistory("/"),
  routes: [
    { path: "/", name: "home", component: () => import("./views/HomePage.vue"), meta: { title: "Home" } },
    { path: "/visualize", name: "visualize", component: () => import("./views/VisualizePage.vue"), meta: { title: "Visualize" } },
    // Akvorado's links: /visualize/v1-<state>, read and turned into a readable URL.
    { path: "/visualize/:akvorado", name: "visualize-akvorado", component: () => import("./views/VisualizePage.vue"), meta: { title: "Visualize" } },
    { path: "/flows", name: "flows", component: () => import("./views/FlowsPage.vue"), meta: { title: "Flows" } },
    { path: "/exporters", name: "exporters", component: () => import("./views/ExportersPage.vue"), meta: { title: "Exporters" } },
    { path: "/views", name: "views", component: () => import("./views/ViewsPage.vue"), meta: { title: "Saved views" } },
    { path: "/:path(.*)*", name: "not-found", component: () => import("./views/NotFoundPage.vue"), meta: { title: "Not found" } },
  ],
});

router.afterEach((to) => {
  document.title = `${(to.meta.title as string) ?? ""} · flowzero`;
  if (to.name === "visualize") lastVisualize.value = to.fullPath;
});
