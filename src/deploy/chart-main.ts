// `npm run helm:generate [-- --check]`: copies config/ into the Helm chart (chart.ts). With
// --check it writes nothing and exits 1 when a copy is stale. Wiring only.
import { generateChart } from "./chart.js";

const check = process.argv.includes("--check");
const stale = generateChart(check);
if (check && stale.length > 0) {
  process.stderr.write(
    `deploy/helm/liken is stale against config/: ${stale.join(", ")}; run npm run helm:generate\n`,
  );
  process.exitCode = 1;
} else {
  process.stderr.write(
    stale.length === 0
      ? "deploy/helm/liken: up to date with config/\n"
      : `deploy/helm/liken: wrote ${stale.join(", ")}\n`,
  );
}
