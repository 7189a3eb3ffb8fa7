// `liken channel serve <dir>`: a static server for the lab and tests.
import type { Command } from "commander";
import { parsePort } from "./numbers.js";
import { serveChannel } from "../../release/serve.js";

export function registerChannel(program: Command): void {
  const channel = program.command("channel").description("Serve a release channel");
  channel
    .command("serve <dir>")
    .description(
      "Serve <dir> (channel.yaml, <version>/release.yaml, artifacts) over HTTP until stopped",
    )
    .option("--port <port>", "TCP port (0 picks a free one)", parsePort, 8080)
    .option("--host <host>", "address to listen on", "127.0.0.1")
    .action(async (dir: string, o: { port: number; host: string }) => {
      const s = await serveChannel(dir, o.port, o.host);
      process.stdout.write(`serving ${dir} at ${s.url}\n`);
      await new Promise<void>((resolve) => {
        process.once("SIGINT", resolve);
        process.once("SIGTERM", resolve);
      });
      await s.close();
    });
}
