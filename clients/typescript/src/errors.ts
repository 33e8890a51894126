/** The API's error envelope (`{"error": {code, message, details}}`) as exceptions. */

export interface ErrorEnvelope {
  code: string;
  message: string;
  details?: unknown;
}

/** An error answer from the server: `status` is the HTTP status, `code` the envelope's code. */
export class MemoryHubError extends Error {
  readonly status: number;
  readonly code: string;
  readonly details: unknown;
  /** Seconds the server asked to wait (`Retry-After`), when it said. */
  readonly retryAfter: number | null;

  constructor(status: number, envelope: ErrorEnvelope, retryAfter: number | null = null) {
    super(envelope.message);
    this.name = "MemoryHubError";
    this.status = status;
    this.code = envelope.code;
    this.details = envelope.details ?? null;
    this.retryAfter = retryAfter;
  }
}

/** No answer at all (connection refused or reset, timeout): `status` is 0. */
export class TransportError extends MemoryHubError {
  constructor(message: string) {
    super(0, { code: "transport_error", message });
    this.name = "TransportError";
  }
}

/** The envelope of an error answer, or one made up when the body is not an envelope. */
export function envelopeOf(status: number, body: unknown): ErrorEnvelope {
  if (typeof body === "object" && body !== null && "error" in body) {
    const error = (body as { error: unknown }).error;
    if (typeof error === "object" && error !== null && "code" in error && "message" in error) {
      return error as ErrorEnvelope;
    }
  }
  return { code: `http_${status}`, message: `the server answered ${status}`, details: body };
}
