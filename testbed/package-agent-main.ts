// `npm run package:agent [-- --out DIR]`: writes the agent package (testbed/package-agent.ts)
// and prints where it is and how big. Wiring only.
import path from "node:path";
import { parseArgs } from "node:util";
import { packageAgent } from "./package-agent.js";

const { values } = parseArgs({ options: { out: { type: "string", default: "out/agent" } } });
const pkg = await packageAgent({ out: path.resolve(values.out) });
const mib = (n: number): string => `${(n / 1024 / 1024).toFixed(1)} MiB`;
console.log(`tree:    ${pkg.tree}`);
console.log(`tarball: ${pkg.tarball} (${mib(pkg.sizes.tarball)})`);
console.log(
  `bundle ${mib(pkg.sizes.bundle)}, zstd.wasm ${mib(pkg.sizes.wasm)}, native addon ${mib(pkg.sizes.addon)}`,
);
