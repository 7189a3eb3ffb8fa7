// Where `liken release sign init` puts the root keys (issue 42, item 10): each where it is told
// (one directory per key), encrypted with a passphrase when asked, with a warning when they
// share a directory; and the later commands find and decrypt them there.
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { initChannel, refreshChannel, rotateKey } from "../../src/release/tuf.js";

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

async function tmp(): Promise<string> {
  const d = await mkdtemp(path.join(tmpdir(), "liken-keys-"));
  dirs.push(d);
  return d;
}

const pems = async (dir: string, role: string): Promise<string[]> =>
  (await readdir(dir)).filter((n) => n.startsWith(`${role}-`) && n.endsWith(".pem"));

describe("root keys", () => {
  it("go one per directory, encrypted when asked, and sign a rotation from there", async () => {
    const base = await tmp();
    const repo = path.join(base, "site");
    const keys = path.join(base, "keys");
    const rootKeyDirs = ["usb-1", "usb-2", "usb-3"].map((d) => path.join(base, d));
    const warnings: string[] = [];
    const o = {
      repo,
      keys,
      rootKeyDirs,
      passphrase: "correct horse",
      warn: (m: string) => warnings.push(m),
    };
    await initChannel({ ...o, roles: { root: { threshold: 2, keys: 3 } } });
    expect(warnings).toEqual([]);
    expect(await pems(keys, "root")).toEqual([]);
    for (const d of rootKeyDirs) {
      const [one, ...more] = await pems(d, "root");
      expect(more).toEqual([]);
      expect(await readFile(path.join(d, one!), "utf8")).toContain("BEGIN ENCRYPTED PRIVATE KEY");
    }
    // The online roles sign from --keys alone; the root keys are not needed.
    await refreshChannel({ repo, keys });
    // A root rotation needs them: refused without, done with the directories and the passphrase.
    await expect(rotateKey({ repo, keys, role: "root" })).rejects.toMatchObject({
      code: "LIKEN_CHANNEL_THRESHOLD_NOT_MET",
    });
    await expect(
      rotateKey({ repo, keys, rootKeyDirs, passphrase: "wrong", role: "root" }),
    ).rejects.toMatchObject({
      code: "LIKEN_CHANNEL_KEY_UNREADABLE",
    });
    expect(await rotateKey({ ...o, role: "root" })).toEqual({ rootVersion: 2 });
  });

  it("warn when they share a directory", async () => {
    const base = await tmp();
    const warnings: string[] = [];
    await initChannel({
      repo: path.join(base, "site"),
      keys: path.join(base, "keys"),
      roles: { root: { threshold: 2, keys: 3 } },
      warn: (m) => warnings.push(m),
    });
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(
      /^root keys 1, 2, 3 share .*keys: root keys are meant to live apart and offline; give each its own --root-key DIR/,
    );
    expect(await pems(path.join(base, "keys"), "root")).toHaveLength(3);
  });

  it("one directory per root key, or a refusal that says so", async () => {
    const base = await tmp();
    await expect(
      initChannel({
        repo: path.join(base, "site"),
        keys: path.join(base, "keys"),
        rootKeyDirs: [path.join(base, "usb-1")],
        roles: { root: { threshold: 2, keys: 3 } },
      }),
    ).rejects.toMatchObject({ code: "LIKEN_CHANNEL_ROOT_KEY_DIRS" });
  });
});
