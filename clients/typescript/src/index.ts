export { MemoryHub, METHODS, NOT_COVERED, retryAfter } from "./client.js";
export type { Answer, BodyOf, CallArgs, Keyed, OperationId, Options, PathOf, QueryOf, RetryPolicy } from "./client.js";
export { MemoryHubError, TransportError } from "./errors.js";
export type { ErrorEnvelope } from "./errors.js";
export type { components, operations, paths } from "./schema.js";
