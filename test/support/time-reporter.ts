// A vitest reporter that writes how long one run and each of its files took, for .ci/run's
// time report (test/support/time-report.ts). It is on when LIKEN_TIME_DIR names a directory
// (vitest.config.ts); each vitest run writes one file there, so `npm test`'s tiers, run one
// after the other, each leave theirs.
import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import type { Reporter, TestModule } from "vitest/node";

/** One vitest run's times, as written to LIKEN_TIME_DIR/<started>-<pid>.json. */
export interface RunTimes {
  /** The projects the run's files belonged to (a tier may be two projects: integration). */
  projects: string[];
  startedAt: number;
  seconds: number;
  files: FileTime[];
}

export interface FileTime {
  project: string;
  /** Relative to the repository. */
  file: string;
  /** In its worker: the import of the file and its hooks and tests. */
  seconds: number;
  state: string;
}

export function fileTime(m: TestModule, root: string): FileTime {
  const d = m.diagnostic();
  return {
    project: m.project.name,
    file: path.relative(root, m.moduleId),
    seconds: round((d.collectDuration + d.setupDuration + d.duration) / 1000),
    state: m.state(),
  };
}

const round = (s: number): number => Math.round(s * 10) / 10;

export default class TimeReporter implements Reporter {
  private readonly started = Date.now();

  constructor(
    private readonly dir: string,
    private readonly root: string = process.cwd(),
  ) {}

  onTestRunEnd(modules: ReadonlyArray<TestModule>): void {
    const files = modules.map((m) => fileTime(m, this.root));
    const run: RunTimes = {
      projects: [...new Set(files.map((f) => f.project))].sort(),
      startedAt: this.started,
      seconds: round((Date.now() - this.started) / 1000),
      files,
    };
    mkdirSync(this.dir, { recursive: true });
    writeFileSync(
      path.join(this.dir, `${this.started}-${process.pid}.json`),
      `${JSON.stringify(run, null, 2)}\n`,
    );
  }
}
