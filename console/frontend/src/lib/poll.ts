// Periodic refresh that pauses while the tab is hidden (a console left open in a background
// tab must not query the server all night) and catches up when it is shown again.
import { onBeforeUnmount, onMounted, ref, watch, type Ref } from "vue";

export function usePoll(fn: () => void | Promise<void>, periodMs: Ref<number> | number) {
  let timer: ReturnType<typeof setTimeout> | null = null;
  let last = 0;
  let running = false;
  const period = typeof periodMs === "number" ? ref(periodMs) : periodMs;

  const run = async () => {
    if (running) return; // a slow answer: skip this tick rather than pile up requests
    running = true;
    last = Date.now();
    try {
      await fn();
    } finally {
      running = false;
    }
  };
  const schedule = () => {
    if (timer) clearTimeout(timer);
    timer = null;
    if (period.value <= 0 || document.visibilityState === "hidden") return;
    const wait = Math.max(0, last + period.value - Date.now());
    timer = setTimeout(async () => {
      await run();
      schedule();
    }, wait);
  };
  const onVisibility = () => schedule();

  onMounted(() => {
    last = Date.now();
    document.addEventListener("visibilitychange", onVisibility);
    schedule();
  });
  onBeforeUnmount(() => {
    if (timer) clearTimeout(timer);
    document.removeEventListener("visibilitychange", onVisibility);
  });
  watch(period, () => schedule());
  return {
    // now runs fn at once and restarts the period.
    now: async () => {
      await run();
      schedule();
    },
  };
}

// useNow is a clock ticking every periodMs, for "5 s ago" labels.
export function useNow(periodMs = 1000) {
  const now = ref(new Date());
  usePoll(() => {
    now.value = new Date();
  }, periodMs);
  return now;
}
