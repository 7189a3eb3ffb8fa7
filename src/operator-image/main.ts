// `npm run image [-- --refresh-base] [-- --out <dir>]`: builds the operator image and prints the
// path of its OCI archive. Wiring only; the work is in build.ts.
import { Command } from "commander";
import { buildImage } from "./build.js";
import { runProgram } from "../controlplane/run-program.js";

const err = (l: string): void => void process.stderr.write(`${l}\n`);

const program = new Command("image")
  .description("Build the liken operator image (an OCI archive) with no container daemon.")
  .option("--out <dir>", "where to write the archive (default: out)")
  .option("--refresh-base", "rebuild the cached Debian base layer to take in Debian's updates")
  .exitOverride()
  .action(async (o: { out?: string; refreshBase?: boolean }) => {
    const built = await buildImage(err, o);
    err(
      `image: ${built.ref} in ${built.archive} (${(built.bytes / 1024 / 1024).toFixed(1)} MiB) built in ${built.seconds.toFixed(1)} s`,
    );
    process.stdout.write(`${built.archive}\n`);
  });

await runProgram(program);
