import { createApp } from "vue";
import App from "./App.vue";
import { router } from "./router";
import { startPrefs } from "./lib/prefs";
import "./style.css";

startPrefs();
createApp(App).use(router).mount("#app");
