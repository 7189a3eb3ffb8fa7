// An ESP and an efivarfs stand-in as liken's systemd-boot install leaves them, for the tests
// that run the real systemd-boot backend over directories: the two entries liken-a.conf and
// liken-b.conf, and LoaderEntryDefault naming slot a's.
import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { EfivarfsDir } from "../../src/bootloader/efivars.js";

/** The default entry text: a title alone, enough for the backend (it reads no other key). */
const titleOnly = (slot: string): string => `title liken ${slot}\n`;

/** Writes both entries under `esp`, makes `efivars`, sets slot a the default; the variables. */
export async function systemdBootEsp(
  esp: string,
  efivars: string,
  entry: (slot: string) => string = titleOnly,
): Promise<EfivarfsDir> {
  mkdirSync(path.join(esp, "loader", "entries"), { recursive: true });
  mkdirSync(efivars, { recursive: true });
  for (const s of ["a", "b"]) {
    writeFileSync(path.join(esp, "loader", "entries", `liken-${s}.conf`), entry(s));
  }
  const vars = new EfivarfsDir(efivars);
  await vars.set("LoaderEntryDefault", "liken-a.conf");
  return vars;
}
