// The leftover check of files run side by side (test/support/leftovers.ts): a file's processes
// are those below its worker, at any depth, zombies and the worker's own helpers aside.
import { spawn } from "node:child_process";
import { describe, expect, it } from "vitest";
import { descendants, processTable, workerHelper, type ProcessSeen } from "../support/leftovers.js";

const p = (pid: number, ppid: number, cmdline = `cmd-${pid}`, state = "S"): ProcessSeen => ({
  pid,
  ppid,
  state,
  cmdline,
});

describe("a test file's leftover processes", () => {
  it("everything below the worker, grandchildren listed before their parent included", () => {
    const table = [p(30, 20), p(1, 0), p(10, 1), p(20, 10), p(21, 10), p(40, 1)];
    expect(descendants(10, table).map((x) => x.pid)).toEqual([20, 21, 30]);
  });

  it("a zombie is ended; esbuild's service belongs to the worker", () => {
    const table = [
      p(20, 10, "liken agent", "Z"),
      p(21, 10, "/node_modules/@esbuild/linux-x64/bin/esbuild --service=0.28.2 --ping"),
      p(22, 10, "liken operator --kubeconfig x"),
    ];
    expect(descendants(10, table, workerHelper).map((x) => x.pid)).toEqual([22]);
  });

  it("finds a real child of this process, and not once it has exited", async () => {
    const child = spawn("sleep", ["30"]);
    try {
      expect(descendants(process.pid, processTable()).map((x) => x.pid)).toContain(child.pid);
    } finally {
      const exited = new Promise((r) => child.once("exit", r));
      child.kill();
      await exited;
    }
    expect(descendants(process.pid, processTable()).map((x) => x.pid)).not.toContain(child.pid);
  });
});
