// The agent package (testbed/package-agent.ts) built into a temporary directory: its layout,
// the launcher running the packaged CLI and the packaged native addon with nothing of the
// checkout reachable (no node_modules, no src/), and the tarball's list of files.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { execFile, execFileSync, spawn } from "node:child_process";
import {
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  truncateSync,
  writeFileSync,
} from "node:fs";
import { randomBytes } from "node:crypto";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { parse, stringify } from "yaml";
import {
  bareImports,
  LAYOUT,
  NODE_ENGINES,
  packageAgent,
  type AgentPackage,
} from "../../testbed/package-agent.js";
import { ENV_FILES } from "../../src/bootloader/envstore.js";
import { initialEnvBlock } from "../../src/bootloader/grub.js";
import { parseAgentConfig } from "../../src/slots/config.js";
import { PREMATURE_CLOSE_REPAIR } from "../../src/operator-image/bundle.js";
import { buildRelease } from "../../src/release/build.js";
import { keptPages, keptTop } from "../../src/slots/paged-index.js";
import { SlotStore } from "../../src/slots/store.js";
import { INDEX_CHUNK } from "../../src/verify/chunk-index.js";
import { fileSlots } from "../support/file-slots.js";
import { startFaultServer } from "./fault-server.js";

const ROOT = path.resolve(import.meta.dirname, "..", "..");
const version = (
  JSON.parse(readFileSync(path.join(ROOT, "package.json"), "utf8")) as { version: string }
).version;
const out = mkdtempSync(path.join(tmpdir(), "liken-package-"));
let pkg: AgentPackage;

beforeAll(async () => {
  pkg = await packageAgent({ out });
}, 120_000);
afterAll(() => rmSync(out, { recursive: true, force: true }));

/** Runs the packaged launcher from outside the checkout, with node on PATH and nothing else. */
function liken(args: string[], cwd = out): string {
  return execFileSync(path.join(pkg.tree, LAYOUT.launcher), args, {
    cwd,
    encoding: "utf8",
    env: { PATH: `${path.dirname(process.execPath)}:/usr/bin:/bin`, HOME: out },
  });
}

describe("the agent package", () => {
  it("lays out every part under the filesystem root with its mode", () => {
    const modes = Object.fromEntries(
      Object.entries(LAYOUT).map(([k, p]) => [k, statSync(path.join(pkg.tree, p)).mode & 0o777]),
    );
    expect(modes).toEqual({
      launcher: 0o755,
      bundle: 0o644,
      wasm: 0o644,
      addon: 0o755,
      manifest: 0o644,
      unit: 0o644,
      example: 0o644,
      schema: 0o644,
    });
    expect(readFileSync(path.join(pkg.tree, LAYOUT.unit), "utf8")).toBe(
      readFileSync(path.join(ROOT, "config", "systemd", "liken-agent.service"), "utf8"),
    );
    expect(readFileSync(path.join(pkg.tree, LAYOUT.unit), "utf8")).toContain(
      "ExecStart=/usr/bin/liken agent run --config /etc/liken/agent.yaml",
    );
    expect(JSON.parse(readFileSync(path.join(pkg.tree, LAYOUT.manifest), "utf8"))).toMatchObject({
      name: "liken",
      version,
    });
  });

  it("carries node-fetch's repaired premature-close check (Debian's nodejs needs it)", () => {
    const bundle = readFileSync(path.join(pkg.tree, LAYOUT.bundle), "utf8");
    expect(bundle.split(PREMATURE_CLOSE_REPAIR.to).length - 1).toBe(1);
    expect(bundle).not.toContain(PREMATURE_CLOSE_REPAIR.from);
  });

  it("ships an example config whose slots and bootloader fit docs/machine.md", () => {
    const file = path.join(pkg.tree, LAYOUT.example);
    const text = readFileSync(file, "utf8");
    expect(parseAgentConfig(text, "/etc/liken/agent.yaml")).toMatchObject({
      slots: {
        a: { device: "/dev/disk/by-partlabel/liken-a" },
        b: { device: "/dev/disk/by-partlabel/liken-b" },
      },
      stateDir: "/var/lib/liken",
    });
    expect(parse(text)).toMatchObject({
      bootloader: { backend: "grub", envDir: "/boot/efi/EFI/liken" },
      reboot: { command: ["systemctl", "reboot"] },
    });
    // The modeline points at the schema shipped beside it, so an editor on the machine finds it.
    expect(text).toContain(`# yaml-language-server: $schema=/${LAYOUT.schema}\n`);
    expect(readFileSync(path.join(pkg.tree, LAYOUT.schema), "utf8")).toBe(
      readFileSync(path.join(ROOT, "config", "schema", "agent.schema.json"), "utf8"),
    );
  });

  it("the packaged agent refuses its example with a typo, naming the key path and the keys allowed", () => {
    const file = path.join(out, "typo.yaml");
    writeFileSync(
      file,
      readFileSync(path.join(pkg.tree, LAYOUT.example), "utf8").replace(
        "heartbeatSeconds:",
        "heartbeatSecond:",
      ),
    );
    let stderr = "";
    try {
      liken(["agent", "run", "--config", file]);
    } catch (e) {
      stderr = String((e as { stderr?: unknown }).stderr);
    }
    expect(stderr).toContain("LIKEN_AGENT_CONFIG_INVALID");
    expect(stderr).toMatch(
      /typo\.yaml: heartbeatSecond is not a known field \(known: machine, cluster, .*heartbeatSeconds/,
    );
  });

  it("runs liken --version and --help through the launcher, from outside the checkout", () => {
    expect(liken(["--version"]).trim()).toBe(version);
    const help = liken(["--help"]);
    expect(help).toMatch(/^Usage: liken /);
    expect(help).toContain("agent");
    expect(liken(["agent", "run", "--help"])).toContain("--config");
  });

  it("loads the packaged native addon: agent status reads each slot's size", () => {
    const dir = mkdtempSync(path.join(out, "machine-"));
    for (const [slot, size] of [
      ["a", 3 * 1024 * 1024],
      ["b", 5 * 1024 * 1024],
    ] as const) {
      writeFileSync(path.join(dir, `${slot}.img`), "");
      truncateSync(path.join(dir, `${slot}.img`), size);
    }
    writeFileSync(
      path.join(dir, "agent.yaml"),
      "slots: {a: {device: a.img}, b: {device: b.img}}\nrunning: a\nstateDir: state\n",
    );
    const rows = JSON.parse(
      liken(["agent", "status", "--config", path.join(dir, "agent.yaml"), "-o", "json"], dir),
    ) as { slot: string; deviceSize?: number }[];
    expect(rows.map((r) => [r.slot, r.deviceSize])).toEqual([
      ["a", 3 * 1024 * 1024],
      ["b", 5 * 1024 * 1024],
    ]);
  });

  it("runs the agent daemon: the bundled API client reaches for the server and stops on SIGTERM", async () => {
    // Nothing listens on port 1: the heartbeat's refusal proves the inlined HTTP and TLS
    // stack of the API client and the logger work from the bundle, not just the imports.
    const dir = mkdtempSync(path.join(out, "daemon-"));
    for (const slot of ["a", "b"]) {
      writeFileSync(path.join(dir, `${slot}.img`), "");
      truncateSync(path.join(dir, `${slot}.img`), 1024 * 1024);
    }
    mkdirSync(path.join(dir, "esp"));
    for (const f of ENV_FILES) writeFileSync(path.join(dir, "esp", f), initialEnvBlock("a"));
    writeFileSync(path.join(dir, "cmdline"), "liken.slot=a\n");
    writeFileSync(
      path.join(dir, "kubeconfig"),
      stringify({
        apiVersion: "v1",
        kind: "Config",
        clusters: [{ name: "c", cluster: { server: "https://127.0.0.1:1" } }],
        users: [{ name: "u", user: { token: "t" } }],
        contexts: [{ name: "c", context: { cluster: "c", user: "u" } }],
        "current-context": "c",
      }),
    );
    writeFileSync(
      path.join(dir, "agent.yaml"),
      stringify({
        machine: "node-1",
        cluster: "lab",
        kubeconfig: "kubeconfig",
        slots: { a: { device: "a.img" }, b: { device: "b.img" } },
        stateDir: "state",
        cmdline: "cmdline",
        bootloader: { grubenvDir: "esp" },
        reboot: { exitCode: 194 },
        direct: false,
        loopSeconds: 1,
      }),
    );
    const child = spawn(
      path.join(pkg.tree, LAYOUT.launcher),
      ["agent", "run", "--config", path.join(dir, "agent.yaml")],
      { cwd: dir, env: { PATH: `${path.dirname(process.execPath)}:/usr/bin:/bin`, HOME: out } },
    );
    let output = "";
    child.stdout.on("data", (b: Buffer) => (output += b.toString()));
    child.stderr.on("data", (b: Buffer) => (output += b.toString()));
    const exited = new Promise<number | null>((resolve) => child.on("exit", (c) => resolve(c)));
    try {
      await expect
        .poll(() => output, { timeout: 30_000, interval: 200 })
        .toMatch(/ECONNREFUSED 127\.0\.0\.1:1.*"msg":"heartbeat not renewed"/);
      expect(output).not.toMatch(/Dynamic require|Cannot find (module|package)|ERR_MODULE/);
    } finally {
      child.kill("SIGTERM");
    }
    expect(await exited).toBe(0);
  });

  it("the packaged agent decodes a release's zstd pack: the changed chunks travel as frames", async () => {
    // Release 2.0 changes 3 blocks of 1.0, which slot a runs as liken staged it (its index
    // pages kept). The download child, run from the package with no node_modules, must load
    // the inlined codec and the shipped zstd.wasm to use the pages and the pack; without them
    // it logs "index pages refused" and fetches the plain index and chunks instead.
    const dir = mkdtempSync(path.join(out, "packs-"));
    const channel = path.join(dir, "channel");
    const B = INDEX_CHUNK;
    const v1 = Buffer.concat([
      Buffer.from("a line of a config file that compresses well\n".repeat(512 * 100)).subarray(
        0,
        512 * B,
      ),
      randomBytes(512 * B),
    ]);
    const v2 = Buffer.from(v1);
    Buffer.from("the second release changes these blocks\n".repeat(400)).copy(v2, 10 * B, 0, 3 * B);
    const digests: Record<string, string> = {};
    for (const [version, bytes] of [
      ["1.0", v1],
      ["2.0", v2],
    ] as const) {
      const file = path.join(dir, `${version}.img`);
      writeFileSync(file, bytes);
      const r = await buildRelease({
        version,
        out: channel,
        artifacts: [{ name: "rootfs", file }],
      });
      digests[version] = r.digest;
    }
    const slotA = Buffer.alloc(8 * 1024 * 1024);
    v1.copy(slotA);
    const config = fileSlots(dir, { a: slotA, b: 8 * 1024 * 1024 });
    writeFileSync(
      path.join(dir, "agent.yaml"),
      stringify({
        slots: { a: { device: "a.img" }, b: { device: "b.img" } },
        running: "a",
        stateDir: "state",
      }),
    );
    const store = new SlotStore(config);
    mkdirSync(store.dir("a"), { recursive: true });
    const rel = path.join(channel, "1.0");
    await store.writeRelease("a", readFileSync(path.join(rel, "release.yaml")));
    await store.keepIndex("a", "rootfs", readFileSync(path.join(rel, "1.0.img.lkidx")));
    await store.keepIndex("a", keptTop("rootfs"), readFileSync(path.join(rel, "1.0.img.lktop")));
    await store.keepIndex(
      "a",
      keptPages("rootfs"),
      readFileSync(path.join(rel, "1.0.img.lkpages")),
    );

    const server = await startFaultServer(channel);
    let r: { stdout: string; stderr: string };
    try {
      // Not execFileSync: the channel is served from this process.
      r = await promisify(execFile)(
        path.join(pkg.tree, LAYOUT.launcher),
        [
          "agent",
          "download",
          "--config",
          path.join(dir, "agent.yaml"),
          "--source",
          server.url,
          "--version",
          "2.0",
          "--digest",
          digests["2.0"]!,
        ],
        {
          cwd: dir,
          encoding: "utf8",
          env: { PATH: `${path.dirname(process.execPath)}:/usr/bin:/bin`, HOME: out },
        },
      );
    } finally {
      await server.close();
    }
    expect(r.stderr).not.toContain("index pages refused");
    expect(r.stderr).toMatch(/artifact rootfs: index from \d+ kept and 1 fetched page\(s\)/);
    expect(r.stdout).toContain("slot b: staged 2.0");
    const got = (ext: string): number =>
      server.log.filter((g) => g.path === `/2.0/2.0.img${ext}`).length;
    expect({ pack: got(".lkpack") > 0, plainIndex: got(".lkidx"), plain: got("") }).toEqual({
      pack: true,
      plainIndex: 0,
      plain: 0,
    });
    expect(readFileSync(path.join(dir, "b.img")).subarray(0, v2.length).equals(v2)).toBe(true);
  }, 120_000);

  it("lists the expected files in the tarball, owned by root, and no directories", () => {
    const listing = execFileSync("tar", ["-tvzf", pkg.tarball], { encoding: "utf8" })
      .trim()
      .split("\n");
    expect(listing.map((l) => l.split(/\s+/).pop())).toEqual(Object.values(LAYOUT).sort());
    for (const l of listing) expect(l.split(/\s+/)[1]).toBe("0/0");
    expect(listing.filter((l) => l.startsWith("d"))).toEqual([]);
    expect(path.basename(pkg.tarball)).toBe(`liken-agent-${version}-linux-${process.arch}.tar.gz`);
  });
});

describe("the launcher's Node.js check", () => {
  it("holds the engines of package.json", () => {
    const engines = (
      JSON.parse(readFileSync(path.join(ROOT, "package.json"), "utf8")) as {
        engines: { node: string };
      }
    ).engines.node;
    expect(NODE_ENGINES).toBe(engines);
  });

  it.each([
    ["18.20.4", false],
    ["20.0.0", false],
    ["20.18.0", false],
    ["20.18.1", true],
    ["20.19.2", true],
    ["21.7.3", false],
    ["22.0.0", true],
    ["24.1.0", true],
  ])("Node.js %s accepted: %s", (version, ok) => {
    // A stand-in node: evaluates the launcher's check with process.versions.node replaced.
    const fake = path.join(out, `node-${version}`);
    writeFileSync(
      fake,
      `#!/bin/sh\n[ "$1" = -p ] || exit 9\nexec "${process.execPath}" -p "Object.defineProperty(process.versions, 'node', { value: '${version}' }); $2"\n`,
      { mode: 0o755 },
    );
    let result: { status: number | null; stderr: string };
    try {
      execFileSync(path.join(pkg.tree, LAYOUT.launcher), ["--version"], {
        env: { PATH: "/usr/bin:/bin", LIKEN_NODE: fake },
        encoding: "utf8",
        stdio: "pipe",
      });
      result = { status: 0, stderr: "" };
    } catch (e) {
      result = e as { status: number; stderr: string };
    }
    // Accepted: the launcher execs the stand-in with the bundle, which it refuses (exit 9).
    if (ok) expect(result.status).toBe(9);
    else {
      expect(result.status).toBe(1);
      expect(result.stderr).toContain(
        `Node.js v${version} is not supported; liken needs ${NODE_ENGINES}`,
      );
    }
  });
});

describe("bareImports", () => {
  it.each([
    [["node:fs", "fs", "worker_threads"], []],
    [
      ["node:fs", "yaml", "@kubernetes/client-node"],
      ["@kubernetes/client-node", "yaml"],
    ],
  ])("of %j is %j", (paths, want) => {
    const meta = {
      inputs: {},
      outputs: {
        "liken.mjs": {
          bytes: 0,
          inputs: {},
          exports: [],
          imports: paths.map((p) => ({
            path: p,
            kind: "import-statement" as const,
            external: true,
          })),
        },
      },
    };
    expect(bareImports(meta)).toEqual(want);
  });
});
