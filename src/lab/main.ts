// `npm run lab [-- --demo] [-- --machines N]`: wiring only (see lab.ts and demo.ts).
import { Command } from "commander";
import { LikenError } from "../errors.js";
import { runDemo } from "./demo.js";
import { LAB_CLUSTER, LAB_KUBECONFIG, startLab, stopLab, type Lab } from "./lab.js";
import { startFleet } from "./processes.js";

const err = (l: string): void => void process.stderr.write(`${l}\n`);

function tour(lab: Lab): string {
  const [current, next] = lab.releases;
  const manual = lab.fleet.find((m) => m.rebootPolicy === "Manual")?.name ?? "node-4";
  return `
liken lab is running: Kubernetes v${lab.controlPlane.version} at ${lab.controlPlane.server}, channel ${lab.channel.url},
cluster-operator, and ${lab.fleet.length} machines (${lab.fleet.map((m) => `${m.name} ${m.role.toLowerCase()} ${m.rebootPolicy}`).join(", ")}) on ${current!.version}.

In another terminal:
  export KUBECONFIG=${LAB_KUBECONFIG} PATH=${lab.binDir}:$PATH
  kubectl get clusters                      # AVAILABLE shows the newest release the channel announces
  kubectl annotate cluster --all --overwrite liken.sh/check-releases="$(date -Is)"
  npx liken release catalog-entry ${lab.channel.url} ${next!.version}
  kubectl edit cluster ${LAB_CLUSTER}                 # add the entry to spec.releases.catalog, set spec.version
  kubectl get machines -w                   # LIKEN and STATUS change one machine at a time
  npx liken approve-reboot ${LAB_CLUSTER} ${manual}        # a Manual machine waits in RebootPending until you do
  npx liken status ${LAB_CLUSTER}                     # a live view: steps, downloads, turns, what blocks

Ctrl-C stops everything.`;
}

const program = new Command("lab")
  .description(
    "a local fleet: control plane, release channel, cluster-operator, simulated machines running the real agent",
  )
  .option("--demo", "run the rollout the product page describes, then exit")
  .option("--machines <n>", "number of machines (3 leaders, the rest workers)", (v) => Number(v), 5)
  .exitOverride();

program.action(async (o: { demo?: boolean; machines: number }) => {
  const started = Date.now();
  const lab = await startLab({ machines: o.machines, log: err });
  let stopping = false;
  const stop = async (code: number): Promise<void> => {
    if (stopping) return;
    stopping = true;
    err("liken lab: stopping everything it started");
    await stopLab(lab);
    process.exit(code);
  };
  process.on("SIGINT", () => void stop(130));
  process.on("SIGTERM", () => void stop(143));
  try {
    await startFleet(lab, err);
  } catch (e) {
    await stopLab(lab);
    throw e;
  }
  err(`liken lab: ready in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  if (o.demo) {
    let code = 0;
    try {
      process.stdout.write(`${await runDemo(lab, err)}\n`);
    } catch (e) {
      err(`lab: ${(e as Error).message}`);
      code = 1;
    }
    await stop(code);
    return;
  }
  err(tour(lab));
  await new Promise(() => {}); // foreground until Ctrl-C
});

try {
  await program.parseAsync(process.argv);
} catch (e) {
  const code = (e as { code?: unknown }).code;
  if (typeof code === "string" && code.startsWith("commander.")) {
    process.exitCode = (e as { exitCode?: number }).exitCode ?? 1;
  } else {
    err(
      `liken lab: ${e instanceof LikenError ? `${e.message} [${e.code}]` : e instanceof Error ? e.message : String(e)}`,
    );
    process.exitCode = 1;
  }
}
