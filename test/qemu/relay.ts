// A TCP relay on loopback that the host can cut and restore: what the guest's forwarded
// address reaches (QEMU fixes its guestfwd targets at start, so the cut happens here). While
// cut, every open connection is closed and every new one is closed as soon as it arrives, as a
// machine that lost its way to the API server sees it.
import { connect, createServer, type AddressInfo, type Socket } from "node:net";

export interface Relay {
  port: number;
  readonly cut: boolean;
  /** Connections accepted while cut (the guest kept trying). */
  readonly refusedWhileCut: number;
  setCut(cut: boolean): void;
  close(): Promise<void>;
}

export async function startRelay(target: { host: string; port: number }): Promise<Relay> {
  const sockets = new Set<Socket>();
  let cut = false;
  let refused = 0;
  const track = (s: Socket): void => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
    s.on("error", () => s.destroy());
  };
  const server = createServer({ pauseOnConnect: true }, (down) => {
    track(down);
    if (cut) {
      refused++;
      down.destroy();
      return;
    }
    const up = connect(target.port, target.host);
    track(up);
    up.once("connect", () => {
      down.pipe(up).pipe(down);
      down.resume();
    });
    up.on("close", () => down.destroy());
    down.on("close", () => up.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as AddressInfo).port,
    get cut() {
      return cut;
    },
    get refusedWhileCut() {
      return refused;
    },
    setCut(c: boolean) {
      cut = c;
      if (c) for (const s of sockets) s.destroy();
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
