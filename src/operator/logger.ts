// The log the operator and its parts write to (pino's shape, or a test's collector): its own
// module so that a part the operator wires in (./hold.ts) need not import the operator.
export interface Logger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}
