// The release, channel-server and agent slot commands, run in-process through commander
// against real files and a real loopback server.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, truncateSync, writeFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { tmpdir } from "node:os";
import path from "node:path";
import { Command } from "commander";
import { registerAgent } from "../../src/cli/commands/agent.js";
import { registerRelease } from "../../src/cli/commands/release.js";
import { parseSize } from "../../src/cli/commands/size.js";
import { serveChannel, type ChannelServer } from "../../src/release/serve.js";
import { digestOf } from "../../src/verify/digest.js";

const dir = mkdtempSync(path.join(tmpdir(), "liken-cli-"));
let server: ChannelServer;

async function liken(...args: string[]): Promise<string> {
  const program = new Command("liken").exitOverride();
  registerRelease(program);
  registerAgent(program);
  let out = "";
  const write = process.stdout.write.bind(process.stdout);
  process.stdout.write = ((chunk: string) => {
    out += chunk;
    return true;
  }) as typeof process.stdout.write;
  try {
    await program.parseAsync(["node", "liken", ...args]);
  } finally {
    process.stdout.write = write;
  }
  return out;
}

beforeAll(async () => {
  writeFileSync(path.join(dir, "rootfs.img"), randomBytes(300_000));
  writeFileSync(path.join(dir, "a.img"), Buffer.alloc(1 << 20, 1));
  writeFileSync(path.join(dir, "b.img"), "");
  truncateSync(path.join(dir, "b.img"), 1 << 20);
  writeFileSync(
    path.join(dir, "agent.yaml"),
    "slots:\n  a: { device: a.img }\n  b: { device: b.img }\nrunning: a\nstateDir: state\n",
  );
  // Served before the tests build releases into it: serveChannel refuses a missing directory.
  mkdirSync(path.join(dir, "channel"));
  server = await serveChannel(path.join(dir, "channel"));
});
afterAll(async () => {
  await server.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("liken release, liken agent", () => {
  let digest = "";

  it("builds a release and prints the catalog entry; digest and catalog-entry agree", async () => {
    const out = await liken(
      "release",
      "build",
      "--version",
      "2026.10.10-001",
      "--out",
      path.join(dir, "channel"),
      "-a",
      `rootfs=${path.join(dir, "rootfs.img")}`,
      "--chunk-size",
      "64K",
    );
    const doc = readFileSync(path.join(dir, "channel", "2026.10.10-001", "release.yaml"));
    digest = digestOf(doc);
    expect(out).toContain(`- version: "2026.10.10-001"\n  digest: ${digest}\n`);
    expect(
      await liken("release", "digest", path.join(dir, "channel", "2026.10.10-001", "release.yaml")),
    ).toBe(`${digest}\n`);
    expect(await liken("release", "digest", `${server.url}/2026.10.10-001/release.yaml`)).toBe(
      `${digest}\n`,
    );
    expect(await liken("release", "catalog-entry", server.url, "2026.10.10-001")).toBe(
      `- version: "2026.10.10-001"\n  digest: ${digest}\n`,
    );
  });

  it("downloads, shows and re-verifies the slot", async () => {
    const config = path.join(dir, "agent.yaml");
    expect(
      await liken(
        "agent",
        "download",
        "--config",
        config,
        "--source",
        server.url,
        "--version",
        "2026.10.10-001",
        "--digest",
        digest,
      ),
    ).toMatch(/^slot b: staged 2026\.10\.10-001 .* every artifact verified\n$/);
    const status = JSON.parse(await liken("agent", "status", "--config", config, "-o", "json")) as {
      slot: string;
      running: boolean;
      state: string;
      version?: string;
    }[];
    expect(status.map((s) => [s.slot, s.running, s.state, s.version])).toEqual([
      ["a", true, "empty", undefined],
      ["b", false, "staged", "2026.10.10-001"],
    ]);
    expect(await liken("agent", "status", "--config", config)).toMatch(
      /^b\s+staged\s+2026\.10\.10-001\s+\d{4}-/m,
    );
    expect(await liken("agent", "verify", "--config", config)).toBe(
      "slot b: 2026.10.10-001 verified\n",
    );
    await expect(
      liken(
        "agent",
        "download",
        "--config",
        config,
        "--source",
        server.url,
        "--version",
        "2026.10.10-001",
        "--digest",
        "sha256:abc",
      ),
    ).rejects.toThrowError(/--digest sha256:abc: must be sha256: and 64 lowercase hex digits/);
  });

  it.each([
    ["4M", 4 << 20],
    ["512MiB", 512 << 20],
    ["2G", 2 * 1024 ** 3],
    ["65536", 65536],
  ])("reads the size %s", (v, n) => expect(parseSize(v)).toBe(n));
});

describe("liken agent download --peer", () => {
  it.each([
    ["not-a-url", /"not-a-url" is not a URL/],
    ["ftp://10.0.0.7/", /a peer is served over http or https/],
  ])("refuses the peer %s before anything is fetched", async (peer, message) => {
    const stderr = process.stderr.write.bind(process.stderr);
    let said = "";
    process.stderr.write = ((c: string) => ((said += c), true)) as typeof process.stderr.write;
    try {
      await expect(
        liken(
          "agent",
          "download",
          "--source",
          "http://x/",
          "--version",
          "1",
          "--digest",
          `sha256:${"0".repeat(64)}`,
          "--peer",
          peer,
        ),
      ).rejects.toThrow();
    } finally {
      process.stderr.write = stderr;
    }
    expect(said).toMatch(message);
  });
});
