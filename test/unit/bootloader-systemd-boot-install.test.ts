// systemd-boot's install of a release's kernel and initrd on the ESP (src/bootloader/boot-files.ts):
// a temp directory as the ESP, efivars as files, a plain file as the slot device holding the
// release as the download writes it (rootfs at 0, the boot files at their offsets).
import { createHash } from "node:crypto";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statfsSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import pino from "pino";
import { Actions, type ActionParts } from "../../src/agent/act.js";
import { installStagedBootFiles } from "../../src/agent/boot-files.js";
import { MemoryFile, MemoryKeeper } from "../../src/agent/memory.js";
import { bootFilesOf, entryWithBootFiles } from "../../src/bootloader/boot-files.js";
import { EfivarfsDir } from "../../src/bootloader/efivars.js";
import { SystemdBootBootloader, systemdBootOnce } from "../../src/bootloader/systemd-boot.js";
import { isLikenError } from "../../src/errors.js";
import { buildRelease } from "../../src/release/build.js";
import { SlotStore } from "../../src/slots/store.js";
import { parseRelease, type Release } from "../../src/verify/release.js";

const sha = (b: Buffer): string => `sha256:${createHash("sha256").update(b).digest("hex")}`;

/** Every file under `dir` with its bytes' digest: what "untouched" is compared on. */
function snapshot(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  if (!existsSync(dir)) return out;
  for (const e of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (e.isFile()) {
      const p = join(e.parentPath, e.name);
      out[p.slice(dir.length)] = sha(readFileSync(p));
    }
  }
  return out;
}

/** The files the entry systemd-boot picks names, with the digests of their bytes. */
function bootedFiles(esp: string, entryFile: string): Record<string, string> {
  const text = readFileSync(join(esp, "loader/entries", entryFile), "utf8");
  const out: Record<string, string> = {};
  for (const m of text.matchAll(/^(linux|initrd) (\S+)$/gm)) {
    out[m[1]!] = sha(readFileSync(join(esp, m[2]!)));
  }
  return out;
}

const V1_ENTRY = (s: string): string =>
  `title liken slot ${s}\nlinux /liken/${s}/vmlinuz\ninitrd /liken/${s}/initrd.img\n` +
  `options root=PARTLABEL=liken-${s} liken.slot=${s} panic=3\n`;

describe("systemd-boot: a release's kernel and initrd onto the ESP", () => {
  let work: string;
  let esp: string;
  let efi: string;
  let vars: EfivarfsDir;
  let store: SlotStore;
  const kernel = Buffer.from("v2 kernel ".repeat(30_000));
  const initrd = Buffer.from("v2 initrd ".repeat(7_000));
  const v1 = { kernel: Buffer.from("v1 kernel"), initrd: Buffer.from("v1 initrd") };

  /** Publishes a release of `parts` and writes it into slot b's device, as the download does. */
  async function stage(version: string, parts: Record<string, Buffer>): Promise<Release> {
    const files = join(work, `files-${version}`);
    mkdirSync(files);
    const artifacts = Object.entries(parts).map(([name, bytes]) => {
      writeFileSync(join(files, name), bytes);
      return { name, file: join(files, name) };
    });
    const r = await buildRelease({ version, artifacts, out: join(work, "channel") });
    const dev = Buffer.alloc(4 << 20);
    for (const a of r.release.artifacts) parts[a.name]!.copy(dev, a.offset);
    writeFileSync(store.device("b"), dev);
    const doc = readFileSync(join(r.dir, "release.yaml"));
    await store.writeRelease("b", doc);
    return parseRelease(doc);
  }

  const bl = (hooks = {}): SystemdBootBootloader => new SystemdBootBootloader(esp, vars, hooks);

  beforeEach(async () => {
    work = mkdtempSync(join(tmpdir(), "liken-sdb-install-"));
    esp = join(work, "esp");
    efi = join(work, "efivars");
    mkdirSync(join(esp, "loader/entries"), { recursive: true });
    mkdirSync(efi);
    for (const s of ["a", "b"]) {
      mkdirSync(join(esp, "liken", s), { recursive: true });
      writeFileSync(join(esp, "loader/entries", `liken-${s}.conf`), V1_ENTRY(s));
      writeFileSync(join(esp, "liken", s, "vmlinuz"), v1.kernel);
      writeFileSync(join(esp, "liken", s, "initrd.img"), v1.initrd);
    }
    vars = new EfivarfsDir(efi);
    await vars.set("LoaderEntryDefault", "liken-a.conf");
    store = new SlotStore({
      slots: { a: { device: join(work, "slot-a") }, b: { device: join(work, "slot-b") } },
      stateDir: join(work, "state"),
      cmdline: join(work, "cmdline"),
      file: join(work, "agent.yaml"),
    });
    mkdirSync(store.dir("b"), { recursive: true });
  });
  afterEach(() => rmSync(work, { recursive: true, force: true }));

  /** Slot a's boot as it was: its files and its entry, byte for byte. */
  const slotA = (): Record<string, string> => ({
    ...snapshot(join(esp, "liken/a")),
    entry: sha(readFileSync(join(esp, "loader/entries/liken-a.conf"))),
  });

  it("installs them for the trial slot, and the trial boots exactly those bytes", async () => {
    await stage("2", { rootfs: Buffer.from("root"), kernel, initrd });
    const before = slotA();
    await installStagedBootFiles(bl(), store, "b");
    expect(slotA()).toEqual(before);
    expect(readdirSync(join(esp, "liken/b")).sort()).toEqual(["initrd.img", "vmlinuz"]);
    await bl().armTrial("b");
    const booted = await systemdBootOnce(esp, vars);
    expect(booted.slot).toBe("b");
    expect(bootedFiles(esp, "liken-b+0-1.conf")).toEqual({
      linux: sha(kernel),
      initrd: sha(initrd),
    });
    // The entry's other lines stay as the image made them.
    expect(readFileSync(join(esp, "loader/entries/liken-b+0-1.conf"), "utf8")).toBe(V1_ENTRY("b"));
  });

  it("writes nothing when the files and entry are in place, and redoes a file someone deleted", async () => {
    await stage("2", { rootfs: Buffer.from("root"), kernel, initrd });
    await installStagedBootFiles(bl(), store, "b");
    const installed = snapshot(esp);
    // Installed at staging: the check before arming reads them and writes nothing.
    const steps: string[] = [];
    await installStagedBootFiles(bl({ at: (s: string) => steps.push(s) }), store, "b");
    expect(steps).toEqual([]);
    expect(snapshot(esp)).toEqual(installed);
    // Gone (a person, or a kill midway): installed again.
    rmSync(join(esp, "liken/b/initrd.img"));
    await installStagedBootFiles(bl({ at: (s: string) => steps.push(s) }), store, "b");
    expect(steps).toContain("copy initrd");
    expect(snapshot(esp)).toEqual(installed);
  });

  it("points an entry of the shared-kernel layout at the slot's own files", async () => {
    const shared =
      "title liken slot b\nlinux /liken/vmlinuz\ninitrd /liken/initrd.img\noptions x\n";
    writeFileSync(join(esp, "loader/entries/liken-b.conf"), shared);
    await stage("2", { rootfs: Buffer.from("root"), kernel, initrd });
    await installStagedBootFiles(bl(), store, "b");
    expect(readFileSync(join(esp, "loader/entries/liken-b.conf"), "utf8")).toBe(
      "title liken slot b\nlinux /liken/b/vmlinuz\ninitrd /liken/b/initrd.img\noptions x\n",
    );
  });

  it("leaves the entry alone for a release without boot files (the image's kernel boots)", async () => {
    await stage("2", { rootfs: Buffer.from("root") });
    const before = snapshot(esp);
    await installStagedBootFiles(bl(), store, "b");
    expect(snapshot(esp)).toEqual(before);
  });

  it("a kernel alone drops the entry's initrd line: no initrd of another release boots with it", async () => {
    await stage("2", { rootfs: Buffer.from("root"), kernel });
    await installStagedBootFiles(bl(), store, "b");
    expect(bootedFiles(esp, "liken-b.conf")).toEqual({ linux: sha(kernel) });
  });

  it("refuses an initrd without a kernel, before writing", async () => {
    // release.yaml refuses this already (src/verify/release.ts): the document is edited after
    // parsing, to check that the backend holds the rule on its own.
    const r = await stage("2", { rootfs: Buffer.from("root"), kernel, initrd });
    const alone = { ...r, artifacts: r.artifacts.filter((a) => a.name !== "kernel") };
    const before = snapshot(esp);
    const e = await bl()
      .installBootFiles("b", { device: store.device("b"), release: alone })
      .catch((x: unknown) => x);
    expect(isLikenError(e, "LIKEN_BOOTLOADER_BOOT_FILES_INVALID")).toBe(true);
    expect(snapshot(esp)).toEqual(before);
  });

  it("refuses the default slot: its kernel boots the machine", async () => {
    const r = await stage("2", { rootfs: Buffer.from("root"), kernel, initrd });
    const before = snapshot(esp);
    const e = await bl()
      .installBootFiles("a", { device: store.device("b"), release: r })
      .catch((x: unknown) => x);
    expect(isLikenError(e, "LIKEN_BOOTLOADER_REFUSED")).toBe(true);
    expect(snapshot(esp)).toEqual(before);
  });

  it("refuses with the sizes when the ESP has no room, before writing a byte", async () => {
    const r = await stage("2", { rootfs: Buffer.from("root"), kernel, initrd });
    const fs = statfsSync(esp);
    const free = Number(fs.bavail) * Number(fs.bsize);
    // The document only: the check runs on the declared sizes, before anything is read.
    const big = {
      ...r,
      artifacts: r.artifacts.map((a) => (a.name === "kernel" ? { ...a, size: free * 2 } : a)),
    };
    const before = snapshot(esp);
    const e = await bl()
      .installBootFiles("b", { device: store.device("b"), release: big })
      .catch((x: unknown) => x);
    expect(isLikenError(e, "LIKEN_BOOTLOADER_ESP_FULL")).toBe(true);
    expect((e as Error).message).toMatch(
      /the ESP at .* has \d+ bytes free .* release 2 need \d+; nothing was written/,
    );
    expect(snapshot(esp)).toEqual(before);
  });

  it("refuses bytes that do not match the release and installs nothing under the final name", async () => {
    await stage("2", { rootfs: Buffer.from("root"), kernel, initrd });
    const dev = readFileSync(store.device("b"));
    const r = parseRelease((await store.release("b"))!);
    const at = r.artifacts.find((a) => a.name === "initrd")!.offset + 5;
    dev[at] = dev[at]! ^ 1;
    writeFileSync(store.device("b"), dev);
    const before = slotA();
    const e = await installStagedBootFiles(bl(), store, "b").catch((x: unknown) => x);
    expect(isLikenError(e, "LIKEN_BOOTLOADER_BOOT_FILE_MISMATCH")).toBe(true);
    expect(existsSync(join(esp, "liken/b/initrd.img"))).toBe(false);
    expect(readdirSync(join(esp, "liken/b"))).toEqual(["vmlinuz"]);
    expect(slotA()).toEqual(before);
  });

  /** The agent's arm step with this ESP: exits (as reboot.exitCode says) instead of rebooting. */
  async function arm(b: SystemdBootBootloader, r: Release): Promise<{ memory: MemoryKeeper }> {
    const memory = new MemoryKeeper(new MemoryFile(store.config.stateDir));
    const parts = {
      cfg: { reboot: { exitCode: 0 } },
      log: pino({ level: "silent" }),
      store,
      bootloader: b,
      memory,
      downloads: { release: undefined },
      reportRebooting: async () => {},
      exit: () => {
        throw new Error("exit: rebooting");
      },
    } as unknown as ActionParts;
    await new Actions(parts)
      .follow({ kind: "arm", why: "matched" }, "b", { version: r.version, digest: "sha256:x" })
      .catch((e: Error) => {
        if (e.message !== "exit: rebooting") throw e;
      });
    return { memory };
  }

  it("the agent installs them before it records and arms the trial", async () => {
    const r = await stage("2", { rootfs: Buffer.from("root"), kernel, initrd });
    const { memory } = await arm(bl(), r);
    expect(memory.now.trial?.slot).toBe("b");
    expect(await bl().read()).toMatchObject({ defaultSlot: "a", armed: "b", started: null });
    expect(bootedFiles(esp, "liken-b+1-0.conf")).toEqual({
      linux: sha(kernel),
      initrd: sha(initrd),
    });
  });

  it("a refused install arms nothing and records no trial", async () => {
    const r = await stage("2", { rootfs: Buffer.from("root"), kernel, initrd });
    const dev = readFileSync(store.device("b"));
    dev[r.artifacts.find((a) => a.name === "kernel")!.offset] = 0;
    writeFileSync(store.device("b"), dev);
    const e = await arm(bl(), r).catch((x: unknown) => x);
    expect(isLikenError(e, "LIKEN_BOOTLOADER_BOOT_FILE_MISMATCH")).toBe(true);
    expect(await bl().read()).toMatchObject({ defaultSlot: "a", armed: null, started: null });
    expect(existsSync(join(store.config.stateDir, "agent.json"))).toBe(false);
  });

  const steps = ["copy kernel", "rename kernel", "copy initrd", "rename initrd", "entry"];
  it.each(steps)(
    "killed before %s: slot a's boot untouched, the next attempt redoes the copy",
    async (step) => {
      await stage("2", { rootfs: Buffer.from("root"), kernel, initrd });
      const before = slotA();
      const killed = bl({
        at: (s: string) => {
          if (s === step) throw new Error(`killed before ${s}`);
        },
      });
      await expect(installStagedBootFiles(killed, store, "b")).rejects.toThrow(/killed/);
      expect(slotA()).toEqual(before);
      // A half-written copy under the temp name, as a kill during the write leaves one.
      writeFileSync(join(esp, "liken/b/.vmlinuz.tmp"), "half");
      await installStagedBootFiles(bl(), store, "b");
      expect(slotA()).toEqual(before);
      expect(readdirSync(join(esp, "liken/b")).sort()).toEqual(["initrd.img", "vmlinuz"]);
      expect(bootedFiles(esp, "liken-b.conf")).toEqual({
        linux: sha(kernel),
        initrd: sha(initrd),
      });
    },
  );
});

describe("the boot files convention", () => {
  const art = (name: string) => ({
    name,
    path: name,
    size: 1,
    digest: `sha256:${"0".repeat(64)}`,
    offset: 0,
  });
  const rel = (...names: string[]): Release => ({
    apiVersion: "liken.sh/v1alpha1",
    kind: "Release",
    version: "1",
    artifacts: names.map(art),
  });
  it("takes the artifacts named kernel and initrd, kernel first", () => {
    expect(bootFilesOf(rel("rootfs"))).toBeNull();
    expect(bootFilesOf(rel("rootfs", "initrd", "kernel"))?.map((f) => f.role)).toEqual([
      "kernel",
      "initrd",
    ]);
  });

  it("rewrites only the linux and initrd lines", () => {
    const e = "title t\nlinux /old\ninitrd /old-i\ninitrd /extra\noptions o\n";
    expect(entryWithBootFiles(e, { linux: "/k", initrd: "/i" })).toBe(
      "title t\nlinux /k\ninitrd /i\noptions o\n",
    );
    expect(entryWithBootFiles("title t\noptions o\n", { linux: "/k" })).toBe(
      "title t\nlinux /k\noptions o\n",
    );
  });
});
