// The relay over real loopback sockets: bytes pass both ways; a cut resets what is open and
// refuses what comes next; a heal lets the next connection through.
import net from "node:net";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Relay } from "../../src/torture/relay.js";

let echo: net.Server;
let relay: Relay;
let port: number;

beforeAll(async () => {
  // The far end sees the cut as a reset too: it drops the connection, as kube-apiserver does.
  echo = net.createServer((s) => s.on("error", () => s.destroy()).pipe(s));
  await new Promise<void>((r) => echo.listen(0, "127.0.0.1", r));
  relay = new Relay({ host: "127.0.0.1", port: (echo.address() as AddressInfo).port });
  port = Number(new URL(await relay.listen()).port);
});

afterAll(async () => {
  await relay.close();
  await new Promise((r) => echo.close(r));
});

/** Sends `text`, resolves with the echo, or with the error that ended the connection. */
function roundTrip(text: string): Promise<string> {
  return new Promise((resolve) => {
    const s = net.connect(port, "127.0.0.1", () => s.write(text));
    s.once("data", (b) => {
      resolve(b.toString());
      s.destroy();
    });
    s.once("error", (e: NodeJS.ErrnoException) => resolve(e.code ?? e.message));
    s.once("close", () => resolve("closed"));
  });
}

describe("a machine's relay to the API server", () => {
  it("passes bytes both ways", async () => {
    expect(await roundTrip("hello")).toBe("hello");
  });

  it("resets open connections when cut, refuses new ones, and lets them through once healed", async () => {
    const open = net.connect(port, "127.0.0.1");
    await new Promise((r) => open.once("connect", r));
    const ended = new Promise<string>((r) => {
      open.once("error", (e: NodeJS.ErrnoException) => r(e.code ?? e.message));
      open.once("close", () => r("closed"));
    });
    relay.sever();
    expect(await ended).toMatch(/ECONNRESET|closed/);
    expect(await roundTrip("during the cut")).toMatch(/ECONNRESET|closed/);
    relay.heal();
    expect(await roundTrip("after")).toBe("after");
  });
});
