// On a real efivarfs, systemd-boot's variables are immutable files: the kernel refuses to open
// them for writing or to unlink them until the attribute is cleared (bootctl clears it, writes,
// and sets it again). An ext4 directory with the attribute set stands in for it here: the test
// runs as root (CAP_LINUX_IMMUTABLE), as the agent does.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { EfivarfsDir, LOADER_GUID } from "../../src/bootloader/efivars.js";
import { DEFAULT, ONESHOT } from "../../src/bootloader/systemd-boot.js";
import { setImmutable } from "../../src/native/index.js";

const dirs: string[] = [];
function varsDir(): { dir: string; vars: EfivarfsDir; file: (n: string) => string } {
  const dir = mkdtempSync(join(tmpdir(), "liken-efivars-"));
  dirs.push(dir);
  return { dir, vars: new EfivarfsDir(dir), file: (n) => join(dir, `${n}-${LOADER_GUID}`) };
}

afterEach(() => {
  for (const d of dirs.splice(0)) {
    for (const n of [DEFAULT, ONESHOT]) {
      try {
        setImmutable(join(d, `${n}-${LOADER_GUID}`), false);
      } catch {
        // absent
      }
    }
    rmSync(d, { recursive: true, force: true });
  }
});

describe("EfivarfsDir on immutable variable files (efivarfs)", () => {
  it("rewrites an immutable variable and leaves it immutable", async () => {
    const { vars, file } = varsDir();
    await vars.set(DEFAULT, "liken-a.conf");
    expect(setImmutable(file(DEFAULT), true), "the filesystem keeps no attribute flags").toBe(
      false,
    );
    // What the kernel does to a plain write of an immutable file: the reason for the clearing.
    expect(() => writeFileSync(file(DEFAULT), "x")).toThrow(/EPERM|not permitted/);
    await vars.set(DEFAULT, "liken-b.conf");
    expect(await vars.get(DEFAULT)).toBe("liken-b.conf");
    // Set again, as bootctl leaves it: clearing it now says it was set.
    expect(setImmutable(file(DEFAULT), false)).toBe(true);
  });

  it("deletes an immutable variable, and an absent one quietly", async () => {
    const { vars, file } = varsDir();
    await vars.set(ONESHOT, "liken-b.conf");
    setImmutable(file(ONESHOT), true);
    await vars.delete(ONESHOT);
    expect(await vars.get(ONESHOT)).toBeNull();
    await vars.delete(ONESHOT);
  });

  it("creates a variable with no attribute to clear", async () => {
    const { vars } = varsDir();
    await vars.set(ONESHOT, "liken-a.conf");
    expect(await vars.get(ONESHOT)).toBe("liken-a.conf");
  });
});
