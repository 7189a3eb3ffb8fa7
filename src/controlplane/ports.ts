import net from "node:net";
import { ControlPlaneError } from "./errors.js";

/** A port that was free on 127.0.0.1 a moment ago (the kernel picks it). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const addr = srv.address();
      srv.close(() =>
        typeof addr === "object" && addr ? resolve(addr.port) : reject(new Error("no port")),
      );
    });
  });
}

/** Refuses a port someone already listens on, with a line that says what to do. */
export async function assertPortFree(port: number, what: string): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    const srv = net.createServer();
    srv.once("error", (e: NodeJS.ErrnoException) =>
      reject(
        new ControlPlaneError(
          "LIKEN_CLUSTER_PORT_IN_USE",
          `port ${port} on 127.0.0.1 (wanted for ${what}) is ${e.code === "EADDRINUSE" ? "in use by another process" : `unusable: ${e.message}`}; stop that process or choose another port`,
          { cause: e },
        ),
      ),
    );
    srv.listen(port, "127.0.0.1", () => srv.close(() => resolve()));
  });
}
