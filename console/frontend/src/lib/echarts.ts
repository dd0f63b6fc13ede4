// The parts of Apache ECharts the console draws with, registered once: the bundle carries
// only these (tree shaking), not the whole library.
import { use } from "echarts/core";
import { CanvasRenderer } from "echarts/renderers";
import { HeatmapChart, LineChart, PieChart, SankeyChart } from "echarts/charts";
import {
  AxisPointerComponent,
  BrushComponent,
  GridComponent,
  LegendComponent,
  MarkLineComponent,
  TitleComponent,
  ToolboxComponent,
  TooltipComponent,
  VisualMapComponent,
} from "echarts/components";

use([
  CanvasRenderer,
  LineChart,
  PieChart,
  SankeyChart,
  HeatmapChart,
  AxisPointerComponent,
  BrushComponent,
  GridComponent,
  LegendComponent,
  MarkLineComponent,
  TitleComponent,
  ToolboxComponent,
  TooltipComponent,
  VisualMapComponent,
]);

export { default as VChart } from "vue-echarts";
