// The webhook's error family.
import { LikenError, type LikenErrorOptions } from "../../errors.js";

export type WebhookCode =
  /** The Secret with the CA and serving certificate could not be read or created. */
  | "LIKEN_WEBHOOK_TLS"
  /** The ValidatingWebhookConfiguration could not be read or updated. */
  | "LIKEN_WEBHOOK_REGISTRATION"
  /** A flag or the TLS material does not fit (e.g. the URL's host is not in the certificate). */
  | "LIKEN_WEBHOOK_USAGE"
  /** The HTTPS server could not listen. */
  | "LIKEN_WEBHOOK_LISTEN";

export class WebhookError extends LikenError {
  declare readonly code: WebhookCode;
  constructor(code: WebhookCode, message: string, opts: LikenErrorOptions = {}) {
    super(code, message, opts);
  }
}
