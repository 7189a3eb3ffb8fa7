// The guest's serial console over QEMU's unix-socket chardev: everything the guest prints is
// appended to a log file and kept (escape sequences and carriage returns removed) for waiters;
// lines written here reach the guest's init. Waits are event-driven with deadlines.
import { appendFileSync } from "node:fs";
import { connect, type Socket } from "node:net";

interface Waiter {
  re: RegExp;
  from: number;
  resolve: (m: { match: RegExpExecArray; end: number }) => void;
  reject: (e: Error) => void;
  timer: NodeJS.Timeout;
}

// CSI sequences (OVMF and GRUB paint the screen) and other ESC sequences.
// eslint-disable-next-line no-control-regex
const ANSI = /\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Za-z0-9]|\x1b[=>78cDEHM]|\r/g;

const MILESTONE =
  /BdsDxe: starting|liken-grub: booting|LIKEN-(BOOT|UP|FAULT|DEADLINE|CONFIRMED|REBOOT)|Restarting system|Rebooting in|Kernel panic|watchdog/;

export class SerialConsole {
  text = "";
  /** When each milestone line arrived (ms since open): where a boot spends its time. */
  readonly timeline: { ms: number; line: string }[] = [];
  private readonly t0 = Date.now();
  private partial = "";
  private waiters = new Set<Waiter>();
  private closedWith: Error | null = null;

  private constructor(
    private sock: Socket,
    readonly logFile: string,
    /** QEMU may exit and start again (a power cycle): the owner says when the console is over. */
    private readonly reopens: boolean,
  ) {
    this.wire(sock);
  }

  private wire(sock: Socket): void {
    sock.on("data", (d: Buffer) => {
      appendFileSync(this.logFile, d);
      const clean = d.toString("latin1").replace(ANSI, "");
      this.text += clean;
      this.noteMilestones(clean);
      this.check();
    });
    // A console that reopens outlives its socket: whether QEMU's exit ends it is the owner's
    // call (`fail`), made when the process has exited.
    sock.on("close", () => {
      if (!this.reopens) this.fail(new Error("the serial console closed (QEMU exited)"));
    });
    sock.on("error", (e) => {
      if (!this.reopens) this.fail(e);
    });
  }

  private noteMilestones(clean: string): void {
    const lines = (this.partial + clean).split("\n");
    this.partial = lines.pop() ?? "";
    for (const line of lines) {
      if (MILESTONE.test(line)) this.timeline.push({ ms: Date.now() - this.t0, line: line.trim() });
    }
  }

  /** Connects to QEMU's socket (server=on,wait=on: QEMU starts the guest once we are in). */
  static async open(
    path: string,
    logFile: string,
    deadlineMs: number,
    o: { reopens?: boolean } = {},
  ): Promise<SerialConsole> {
    return new SerialConsole(await connectSocket(path, deadlineMs), logFile, o.reopens === true);
  }

  /** The same console on a new QEMU's socket: the text, the waiters and the log go on. */
  async reopen(path: string, deadlineMs: number): Promise<void> {
    this.sock.destroy();
    this.sock = await connectSocket(path, deadlineMs);
    this.wire(this.sock);
  }

  /** Ends every wait, now and later, with `e`. */
  fail(e: Error): void {
    this.closedWith ??= e;
    for (const w of this.waiters) {
      clearTimeout(w.timer);
      w.reject(e);
    }
    this.waiters.clear();
  }

  private check(): void {
    for (const w of this.waiters) {
      const re = new RegExp(w.re.source, w.re.flags.replace("g", "") + "g");
      re.lastIndex = w.from;
      const m = re.exec(this.text);
      if (m !== null) {
        clearTimeout(w.timer);
        this.waiters.delete(w);
        w.resolve({ match: m, end: m.index + m[0].length });
      }
    }
  }

  /** The first match of `re` at or after offset `from`, within `timeoutMs`. */
  waitFor(
    re: RegExp,
    from: number,
    timeoutMs: number,
    what: string,
  ): Promise<{ match: RegExpExecArray; end: number }> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters.delete(w);
        const tail = this.text.slice(-600);
        reject(
          new Error(
            `no ${what} on the serial console within ${timeoutMs / 1000} s; last output:\n${tail}`,
          ),
        );
      }, timeoutMs);
      const w: Waiter = { re, from, resolve, reject, timer };
      this.waiters.add(w);
      if (this.closedWith !== null) this.fail(this.closedWith);
      else this.check();
    });
  }

  send(line: string): void {
    this.sock.write(`${line}\n`);
  }

  close(): void {
    this.sock.destroy();
  }
}

async function connectSocket(path: string, deadlineMs: number): Promise<Socket> {
  const until = Date.now() + deadlineMs;
  for (;;) {
    try {
      return await new Promise<Socket>((resolve, reject) => {
        const s = connect(path, () => resolve(s));
        s.once("error", reject);
      });
    } catch (e) {
      if (Date.now() > until)
        throw new Error(`QEMU's serial socket ${path} never opened`, { cause: e });
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}
