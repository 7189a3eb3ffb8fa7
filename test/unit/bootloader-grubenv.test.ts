import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import {
  createEnvBlock,
  envDelete,
  envSet,
  ENVBLK_SIZE,
  getEnv,
  parseEnvBlock,
} from "../../src/bootloader/grubenv.js";
import { isLikenError } from "../../src/errors.js";
import { CASES, type GoldenCase } from "./golden/grubenv/cases.js";
import { GOLDEN_DIR, generateAll } from "./golden/grubenv/generate.js";

function replay(c: GoldenCase): Buffer {
  let buf = createEnvBlock();
  c.ops.forEach((op, i) => {
    const last = i === c.ops.length - 1;
    try {
      buf = "set" in op ? envSet(buf, op.set[0], op.set[1]) : envDelete(buf, op.unset);
      if (last && c.lastFails === true) throw new Error("expected the last op to fail");
    } catch (e) {
      if (!(last && c.lastFails === true && isLikenError(e, "LIKEN_BOOTLOADER_ENV_NO_SPACE"))) {
        throw e;
      }
    }
  });
  return buf;
}

function golden(name: string, dir = GOLDEN_DIR): Buffer {
  return readFileSync(join(dir, `${name}.env`));
}

describe("grubenv against Debian's grub-editenv", () => {
  it.each(CASES.map((c) => [c.name, c] as const))("%s: same bytes", (_n, c) => {
    expect(replay(c).toString("latin1")).toBe(golden(c.name).toString("latin1"));
  });

  const regen = mkdtempSync(join(tmpdir(), "liken-grubenv-"));
  afterAll(() => rmSync(regen, { recursive: true, force: true }));

  it("the committed golden files are what grub-editenv makes today", () => {
    try {
      execFileSync("grub-editenv", ["--version"], { stdio: "ignore" });
    } catch (e) {
      throw new Error("grub-editenv is missing: run testbed/setup-debian.sh", { cause: e });
    }
    generateAll(regen);
    for (const c of CASES) expect(golden(c.name, regen).equals(golden(c.name))).toBe(true);
    // About 30 runs of grub-editenv: 4 s measured at a load of 24 on 2 cores.
  }, 60_000);

  it("parses what grub-editenv wrote, escapes included", () => {
    const vars = parseEnvBlock(golden("escapes"));
    expect(getEnv(vars, "v")).toBe("back\\slash\nnew line=eq");
    expect(getEnv(vars, "w")).toBe("after");
    expect(parseEnvBlock(golden("created"))).toEqual([]);
  });
});

describe("grubenv refuses what GRUB could not use", () => {
  const ok = envSet(createEnvBlock(), "saved_entry", "a");
  const cases: [string, Buffer, RegExp][] = [
    ["short file", ok.subarray(0, 512), /512 bytes instead of 1024/],
    ["long file", Buffer.concat([ok, Buffer.from("#")]), /1025 bytes instead of 1024/],
    ["bad signature", Buffer.from(ok).fill(0x41, 2, 3), /signature is missing/],
    ["zeroed", Buffer.alloc(ENVBLK_SIZE), /signature is missing/],
    [
      "no newline before padding",
      (() => {
        const b = Buffer.from(ok);
        b[b.indexOf("saved_entry=a\n") + 13] = 0x62;
        return b;
      })(),
      /padding does not follow a newline/,
    ],
    [
      "line without =",
      (() => {
        const b = createEnvBlock();
        b.write("junk\n", b.indexOf("!!!\n") + 4, "latin1");
        return b;
      })(),
      /without `=`|without a variable name/,
    ],
  ];
  it.each(cases)("%s", (_n, buf, msg) => {
    let err: unknown;
    try {
      parseEnvBlock(buf, "/boot/efi/EFI/liken/grubenv");
    } catch (e) {
      err = e;
    }
    expect(isLikenError(err, "LIKEN_BOOTLOADER_ENV_CORRUPT")).toBe(true);
    expect((err as Error).message).toMatch(msg);
    expect((err as Error).message).toContain("/boot/efi/EFI/liken/grubenv");
  });

  it("never grows the block and refuses bad names", () => {
    expect(() => envSet(createEnvBlock(), "big", "x".repeat(1000))).toThrow(/cannot grow/);
    expect(() => envSet(createEnvBlock(), "a=b", "1")).toThrow(/invalid GRUB environment/);
    expect(() => envSet(createEnvBlock(), "", "1")).toThrow(/invalid GRUB environment/);
  });
});
