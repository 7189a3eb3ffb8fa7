// The machine's smoke boot (`npx tsx testbed/machine/main.ts --boot`, and the QEMU tier's
// machine-image.test.ts) leaves no /tmp/liken-machine-smoke-* folder when it passed, and keeps
// only the logs of one that failed (testbed/machine/smoke.ts, cleanGuestDir).
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { cleanGuestDir, type GuestOutcome } from "../../testbed/machine/smoke.js";

const made: string[] = [];
afterEach(() => {
  for (const d of made.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A guest's folder as startGuest and QEMU leave it. */
function guestDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "liken-machine-smoke-test-"));
  made.push(dir);
  for (const f of ["disk.img", "vars.fd", "serial.log", "qemu.stderr"]) {
    writeFileSync(join(dir, f), f);
  }
  return dir;
}

describe("cleanGuestDir", () => {
  it.each<{ outcome: GuestOutcome; left: string[] | undefined }>([
    { outcome: "passed", left: undefined },
    { outcome: "failed", left: ["qemu.stderr", "serial.log"] },
    { outcome: "keep", left: ["disk.img", "qemu.stderr", "serial.log", "vars.fd"] },
  ])("$outcome leaves $left", ({ outcome, left }) => {
    const dir = guestDir();
    cleanGuestDir(dir, outcome);
    expect(existsSync(dir) ? readdirSync(dir).sort() : undefined).toEqual(left);
  });
});
