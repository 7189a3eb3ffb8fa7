// The agent package's CLI on the Node.js a machine runs: Debian trixie's nodejs from the
// machine image's root filesystem (testbed/machine/rootfs.ts, cached like the QEMU tier's), on
// loopback against the real control plane. `liken drain` and `liken uncordon` use client-node
// with kept-alive connections, as the agent's drain does. Debian's nodejs (20.19.2+deb13u3,
// carrying the CVE-2026-48931 backport) leaves a 'data' listener on every kept-alive socket, which
// node-fetch 2 reads as a chunked answer cut short: without the bundle's repair every request
// after the first on a connection fails with "Premature close" (what the booted machine showed;
// docs/adr/node-fetch-premature-close.md).
//
// Debian's node runs here with its own loader and libraries; it reads some of its built-in
// modules from /usr/share/nodejs, which a private mount namespace (unshare -m, as root) lends it.
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LAYOUT, packageAgent } from "../../testbed/package-agent.js";
import { baseRootfs } from "../../testbed/machine/rootfs.js";
import { createKwokNode, kubeconfigPath, kubectl, uniqueName } from "../support/kube.js";

const run = promisify(execFile);
const out = mkdtempSync(path.join(tmpdir(), "liken-package-debian-"));
let debianNode = "";
let launcher = "";

beforeAll(async () => {
  const root = path.join((await baseRootfs(() => undefined)).dir, "root");
  const lib = `${root}/usr/lib/x86_64-linux-gnu:${root}/lib/x86_64-linux-gnu`;
  debianNode = path.join(out, "debian-node");
  writeFileSync(
    debianNode,
    [
      "#!/bin/sh",
      "# Debian's node from the machine's root filesystem, in a private mount namespace.",
      `exec unshare -m sh -c 'mount --make-rprivate / && mount -t tmpfs none /usr/share && ` +
        `mkdir /usr/share/nodejs && mount --bind ${root}/usr/share/nodejs /usr/share/nodejs && ` +
        `exec ${root}/lib64/ld-linux-x86-64.so.2 --library-path ${lib} ${root}/usr/bin/node "$@"' sh "$@"`,
      "",
    ].join("\n"),
    { mode: 0o755 },
  );
  await packageAgent({ out: path.join(out, "pkg") });
  launcher = path.join(out, "pkg", "tree", LAYOUT.launcher);
}, 600_000);
afterAll(() => rmSync(out, { recursive: true, force: true }));

describe("the agent package on Debian's nodejs", () => {
  it("runs the Node.js the machine image ships (Debian trixie's 20.19.2)", async () => {
    const { stdout } = await run(debianNode, ["-p", "process.version"]);
    expect(stdout.trim()).toBe("v20.19.2");
  });

  it("drains and uncordons over kept-alive connections without a Premature close", async () => {
    const node = uniqueName("debian-node");
    await createKwokNode(node);
    const env = { ...process.env, LIKEN_NODE: debianNode };
    const liken = (args: string[]) =>
      run(launcher, [...args, "--kubeconfig", kubeconfigPath()], { env }).catch(
        (e: { code?: number; stdout?: string; stderr?: string }) => e,
      );
    const drained = await liken(["drain", node]);
    expect(`${drained.stdout}${drained.stderr}`).not.toMatch(/Premature close/);
    expect((drained as { code?: number }).code ?? 0).toBe(0);
    const cordoned = await kubectl(["get", "node", node, "-o", "jsonpath={.spec.unschedulable}"]);
    expect(cordoned.stdout).toBe("true");
    const uncordoned = await liken(["uncordon", node]);
    expect(`${uncordoned.stdout}${uncordoned.stderr}`).not.toMatch(/Premature close/);
    expect((uncordoned as { code?: number }).code ?? 0).toBe(0);
    const after = await kubectl(["get", "node", node, "-o", "jsonpath={.spec.unschedulable}"]);
    expect(after.stdout).toBe("");
  });
});
