// `npm run cluster -- up|down|status|build`: a real local control plane for tests and the lab.
// Wiring only; the work is in build.ts and instance.ts.
import { Command } from "commander";
import { ensureBinaries } from "./build.js";
import { ControlPlaneError } from "./errors.js";
import { down, listStates, readState, running, up } from "./instance.js";
import { runProgram } from "./run-program.js";

const err = (line: string): void => {
  process.stderr.write(`${line}\n`);
};

const program = new Command("cluster")
  .description(
    "A local Kubernetes control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok) on loopback.",
  )
  .exitOverride();

program
  .command("build")
  .description("build and cache the pinned binaries (up does this when needed)")
  .action(async () => {
    err(`binaries in ${await ensureBinaries(err)}`);
  });

program
  .command("up")
  .description("start a control plane and print the shell lines that point kubectl at it")
  .option("--name <name>", "instance name: several can run side by side", "default")
  .option("--port <port>", "kube-apiserver port (default: a free one)", (v) => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < 1 || n > 65535) {
      throw new ControlPlaneError(
        "LIKEN_CLUSTER_BAD_PORT",
        `--port ${v} is not a TCP port (1-65535)`,
      );
    }
    return n;
  })
  .action(async (o: { name: string; port?: number }) => {
    const started = Date.now();
    await ensureBinaries(err);
    const s = await up({
      name: o.name,
      ...(o.port !== undefined ? { port: o.port } : {}),
      log: err,
    });
    err(
      `liken: control plane "${s.name}" (Kubernetes v${s.version}) ready at ${s.server} in ${((Date.now() - started) / 1000).toFixed(1)} s; stop it with: npm run -s cluster -- down${o.name === "default" ? "" : ` --name ${o.name}`}`,
    );
    process.stdout.write(`export KUBECONFIG=${s.kubeconfig}\nexport PATH=${s.binDir}:$PATH\n`);
  });

program
  .command("down")
  .description("stop the processes the control plane started (by pid) and remove its data")
  .option("--name <name>", "instance name", "default")
  .action(async (o: { name: string }) => {
    err(
      (await down(o.name, err))
        ? `liken: control plane "${o.name}" stopped and removed`
        : `liken: no control plane "${o.name}" here`,
    );
  });

program
  .command("status")
  .description("what runs where")
  .option("--name <name>", "only this instance")
  .action((o: { name?: string }) => {
    let unreadable = 0;
    const states = o.name
      ? [readState(o.name)].filter((s) => s !== undefined)
      : listStates((line) => {
          unreadable++;
          err(line);
        });
    if (states.length === 0 && unreadable === 0) {
      process.stdout.write(
        "no control plane is running; start one with: npm run -s cluster -- up\n",
      );
      return;
    }
    for (const s of states) {
      const alive = new Set(running(s).map((p) => p.pid));
      const health =
        alive.size === s.processes.length ? "running" : alive.size === 0 ? "stopped" : "degraded";
      process.stdout.write(
        `${s.name}: ${health}, Kubernetes v${s.version}, ${s.server}, kubeconfig ${s.kubeconfig}\n`,
      );
      for (const p of s.processes) {
        process.stdout.write(
          `  ${p.name.padEnd(24)} pid ${String(p.pid).padEnd(8)} ${alive.has(p.pid) ? "running" : "exited "}  log ${p.log}\n`,
        );
      }
    }
  });

await runProgram(program);
