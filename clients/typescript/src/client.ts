/**
 * `MemoryHub`: a thin hand-written layer over types generated from the server's OpenAPI document
 * (docs/adr/0090-typescript-client.md). `call(operationId, …)` reaches every operation, typed by
 * the generated `operations`; the named methods cover what an agent does every turn.
 */

import { envelopeOf, MemoryHubError, TransportError } from "./errors.js";
import { OPERATIONS } from "./operations.js";
import type { operations } from "./schema.js";

export type OperationId = keyof operations & keyof typeof OPERATIONS;
type Op<K extends OperationId> = operations[K];
export type PathOf<K extends OperationId> = Op<K> extends { parameters: { path: infer P } } ? P : never;
export type QueryOf<K extends OperationId> = Op<K> extends { parameters: { query?: infer Q } } ? Q : never;
export type BodyOf<K extends OperationId> = Op<K> extends { requestBody: { content: { "application/json": infer B } } }
  ? B
  : Op<K> extends { requestBody?: { content: { "application/json": infer B } } }
    ? B
    : never;
type Responses<K extends OperationId> = Op<K>["responses"];
type OkStatus<K extends OperationId> = Extract<keyof Responses<K>, 200 | 201 | 202 | 204>;
/** What the operation answers on success (undefined for a 204). */
export type Answer<K extends OperationId> = Responses<K>[OkStatus<K>] extends {
  content: { "application/json": infer R };
}
  ? R
  : undefined;

export interface CallArgs<K extends OperationId> {
  path?: PathOf<K>;
  query?: QueryOf<K>;
  body?: BodyOf<K>;
  /** A text body (`POST /import`'s JSON lines) instead of `body`. */
  text?: string;
  /** The key of a creating call; one is made when left out, and kept by its retries. */
  idempotencyKey?: string;
}

export interface RetryPolicy {
  /** Retries after a 429 or 503 (and, for creating calls only, after no answer at all). */
  maxRetries: number;
  /** First back-off in seconds when the server sends no `Retry-After`; doubles each time. */
  backoff: number;
  /** A `Retry-After` longer than this (seconds) is not waited for: the error is thrown. */
  maxWait: number;
}

export interface Options {
  baseUrl: string;
  apiKey: string;
  retry?: Partial<RetryPolicy>;
  /** Milliseconds before a request is abandoned (30 000). */
  timeoutMs?: number;
  fetch?: typeof fetch;
  sleep?: (seconds: number) => Promise<void>;
}

/** Operations that create: sent with an `Idempotency-Key` (docs/api.md, "Idempotent writes"). */
const CREATES: ReadonlySet<string> = new Set([
  "memories_api_create_memory",
  "memories_api_bulk_create_memories",
  "memories_api_supersede_memory",
  "retrieval_api_add_memory",
  "capture_api_capture",
  "capture_api_observation",
  "conversations_api_create_conversation",
  "conversations_api_add_messages",
  "integrations_api_import_",
]);
const RETRY_STATUSES = new Set([429, 503]);

/** Options of a creating call. */
export interface Keyed {
  idempotencyKey?: string;
}

/** Each named method's operation; the contract test checks that, with NOT_COVERED, they are
 * every operation of the server's OpenAPI document. */
export const METHODS: Readonly<Record<string, OperationId>> = {
  health: "memoryhub_api_get_health",
  createMemory: "memories_api_create_memory",
  bulkCreateMemories: "memories_api_bulk_create_memories",
  getMemory: "memories_api_get_memory",
  updateMemory: "memories_api_edit_memory",
  deleteMemory: "memories_api_delete_memory",
  memoryHistory: "memories_api_memory_history",
  supersedeMemory: "memories_api_supersede_memory",
  listMemories: "memories_api_list_memories",
  retrieve: "retrieval_api_retrieve_memories",
  tools: "retrieval_api_tool_schemas",
  queryMemory: "retrieval_api_query_memory",
  addMemory: "retrieval_api_add_memory",
  capture: "capture_api_capture",
  captureJob: "capture_api_capture_job",
  observe: "capture_api_observation",
  createConversation: "conversations_api_create_conversation",
  addMessages: "conversations_api_add_messages",
  getConversation: "conversations_api_get_conversation",
  recentMessages: "conversations_api_recent_messages",
  putScratchpad: "memories_scratchpad_api_put_scratchpad",
  getScratchpad: "memories_scratchpad_api_get_scratchpad",
  deleteScratchpad: "memories_scratchpad_api_delete_scratchpad",
  listScratchpad: "memories_scratchpad_api_list_scratchpad",
  searchScratchpad: "memories_scratchpad_api_search_scratchpad",
  exportJsonl: "integrations_api_export",
  importJsonl: "integrations_api_import_",
  eraseUser: "memoryhub_api_erase_user",
  getProfile: "profiles_api_get_profile",
  rebuildProfile: "profiles_api_rebuild_profile",
  editProfile: "profiles_api_edit_profile",
  profileVersions: "profiles_api_profile_versions",
  consolidate: "consolidation_api_consolidate",
  consolidation: "consolidation_api_consolidation",
};

/** Operations with no named method, and why (`call()` still reaches them). */
export const NOT_COVERED: Readonly<Record<string, string>> = {
  memories_scratchpad_api_reserved_search_key: "PUT and DELETE of the reserved key `search` only answer an error",
};

export class MemoryHub {
  readonly retry: RetryPolicy;
  private readonly baseUrl: string;
  private readonly apiKey: string;
  private readonly timeoutMs: number;
  private readonly fetcher: typeof fetch;
  private readonly sleep: (seconds: number) => Promise<void>;

  constructor(options: Options) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.apiKey = options.apiKey;
    this.retry = { maxRetries: 3, backoff: 0.5, maxWait: 120, ...options.retry };
    this.timeoutMs = options.timeoutMs ?? 30_000;
    this.fetcher = options.fetch ?? fetch;
    this.sleep = options.sleep ?? ((s) => new Promise((resolve) => setTimeout(resolve, s * 1000)));
  }

  /** Any operation of the OpenAPI document, by its operationId. */
  async call<K extends OperationId>(id: K, args: CallArgs<K> = {}): Promise<Answer<K>> {
    const operation = OPERATIONS[id];
    const url = this.url(operation.path, args.path as Record<string, unknown> | undefined, args.query);
    const headers: Record<string, string> = { Authorization: `Bearer ${this.apiKey}`, Accept: "application/json" };
    let body: string | undefined;
    if (args.text !== undefined) {
      body = args.text;
      headers["Content-Type"] = operation.body ?? "text/plain";
    } else if (args.body !== undefined) {
      body = JSON.stringify(args.body);
      headers["Content-Type"] = "application/json";
    }
    const creates = CREATES.has(id);
    if (creates) headers["Idempotency-Key"] = args.idempotencyKey ?? crypto.randomUUID();
    const response = await this.send(url, { method: operation.method, headers, body }, creates);
    return (await this.decode(response)) as Answer<K>;
  }

  // -- named methods: what an agent does every turn, typed from the generated schema ---------

  health(): Promise<Answer<"memoryhub_api_get_health">> {
    return this.call("memoryhub_api_get_health");
  }

  createMemory(body: BodyOf<"memories_api_create_memory">, options: Keyed = {}) {
    return this.call("memories_api_create_memory", { body, ...options });
  }

  bulkCreateMemories(body: BodyOf<"memories_api_bulk_create_memories">, options: Keyed = {}) {
    return this.call("memories_api_bulk_create_memories", { body, ...options });
  }

  getMemory(memoryId: string, userId: string) {
    return this.call("memories_api_get_memory", { path: { memory_id: memoryId }, query: { user_id: userId } });
  }

  updateMemory(memoryId: string, body: BodyOf<"memories_api_edit_memory">) {
    return this.call("memories_api_edit_memory", { path: { memory_id: memoryId }, body });
  }

  deleteMemory(memoryId: string, userId: string) {
    return this.call("memories_api_delete_memory", { path: { memory_id: memoryId }, query: { user_id: userId } });
  }

  memoryHistory(memoryId: string, userId: string) {
    return this.call("memories_api_memory_history", { path: { memory_id: memoryId }, query: { user_id: userId } });
  }

  supersedeMemory(memoryId: string, body: BodyOf<"memories_api_supersede_memory">, options: Keyed = {}) {
    return this.call("memories_api_supersede_memory", { path: { memory_id: memoryId }, body, ...options });
  }

  listMemories(query: QueryOf<"memories_api_list_memories">) {
    return this.call("memories_api_list_memories", { query });
  }

  /** Every memory matching `query`, page after page (`limit` is the page size). */
  async *iterMemories(query: QueryOf<"memories_api_list_memories">) {
    let cursor: string | null | undefined = undefined;
    do {
      const page: Answer<"memories_api_list_memories"> = await this.listMemories({ ...query, cursor });
      yield* page.items;
      cursor = page.next_cursor;
    } while (cursor);
  }

  retrieve(body: BodyOf<"retrieval_api_retrieve_memories">) {
    return this.call("retrieval_api_retrieve_memories", { body });
  }

  tools() {
    return this.call("retrieval_api_tool_schemas");
  }

  queryMemory(body: BodyOf<"retrieval_api_query_memory">) {
    return this.call("retrieval_api_query_memory", { body });
  }

  addMemory(body: BodyOf<"retrieval_api_add_memory">, options: Keyed = {}) {
    return this.call("retrieval_api_add_memory", { body, ...options });
  }

  capture(body: BodyOf<"capture_api_capture">, options: Keyed = {}) {
    return this.call("capture_api_capture", { body, ...options });
  }

  captureJob(jobId: string, userId: string) {
    return this.call("capture_api_capture_job", { path: { job_id: jobId }, query: { user_id: userId } });
  }

  observe(body: BodyOf<"capture_api_observation">, options: Keyed = {}) {
    return this.call("capture_api_observation", { body, ...options });
  }

  createConversation(body: BodyOf<"conversations_api_create_conversation">, options: Keyed = {}) {
    return this.call("conversations_api_create_conversation", { body, ...options });
  }

  addMessages(conversationId: string, body: BodyOf<"conversations_api_add_messages">, options: Keyed = {}) {
    const path = { conversation_id: conversationId };
    return this.call("conversations_api_add_messages", { path, body, ...options });
  }

  getConversation(conversationId: string, query: QueryOf<"conversations_api_get_conversation">) {
    return this.call("conversations_api_get_conversation", { path: { conversation_id: conversationId }, query });
  }

  recentMessages(conversationId: string, query: QueryOf<"conversations_api_recent_messages">) {
    return this.call("conversations_api_recent_messages", { path: { conversation_id: conversationId }, query });
  }

  putScratchpad(key: string, body: BodyOf<"memories_scratchpad_api_put_scratchpad">) {
    return this.call("memories_scratchpad_api_put_scratchpad", { path: { key }, body });
  }

  getScratchpad(key: string, userId: string) {
    return this.call("memories_scratchpad_api_get_scratchpad", { path: { key }, query: { user_id: userId } });
  }

  deleteScratchpad(key: string, userId: string) {
    return this.call("memories_scratchpad_api_delete_scratchpad", { path: { key }, query: { user_id: userId } });
  }

  listScratchpad(query: QueryOf<"memories_scratchpad_api_list_scratchpad">) {
    return this.call("memories_scratchpad_api_list_scratchpad", { query });
  }

  searchScratchpad(query: QueryOf<"memories_scratchpad_api_search_scratchpad">) {
    return this.call("memories_scratchpad_api_search_scratchpad", { query });
  }

  /** The project (or one user's part) as JSON lines. */
  async exportJsonl(query: QueryOf<"integrations_api_export"> = {}): Promise<string> {
    return String((await this.call("integrations_api_export", { query })) ?? "");
  }

  importJsonl(text: string, options: Keyed = {}) {
    return this.call("integrations_api_import_", { text, ...options });
  }

  eraseUser(userId: string) {
    return this.call("memoryhub_api_erase_user", { path: { user_id: userId } });
  }

  /** The user's profile: standing facts from their active memories (404 before the first is built). */
  getProfile(userId: string) {
    return this.call("profiles_api_get_profile", { path: { user_id: userId } });
  }

  /** Queue a consolidation of the user's memories (202 with a `job_id`). */
  consolidate(userId: string, options: Keyed = {}) {
    return this.call("consolidation_api_consolidate", { path: { user_id: userId }, ...options });
  }

  /** A consolidation's status and counts per action. */
  consolidation(jobId: string, userId: string) {
    return this.call("consolidation_api_consolidation", { path: { job_id: jobId }, query: { user_id: userId } });
  }

  /** Rebuild the user's profile from their active memories now. */
  rebuildProfile(userId: string) {
    return this.call("profiles_api_rebuild_profile", { path: { user_id: userId } });
  }

  /** Pin facts written by hand and leave memories out; a field left out keeps its value. */
  editProfile(userId: string, body: BodyOf<"profiles_api_edit_profile">) {
    return this.call("profiles_api_edit_profile", { path: { user_id: userId }, body });
  }

  /** The profile's versions, newest first. */
  profileVersions(userId: string, limit?: number) {
    return this.call("profiles_api_profile_versions", { path: { user_id: userId }, query: { limit } });
  }

  private url(template: string, path: Record<string, unknown> | undefined, query: unknown): string {
    const filled = template.replace(/\{(\w+)\}/g, (_, name: string) => {
      const value = path?.[name];
      if (value === undefined) throw new TypeError(`missing path parameter ${name}`);
      // A scratchpad key may hold "/": the route takes the rest of the path.
      return name === "key" ? String(value).split("/").map(encodeURIComponent).join("/") : encodeURIComponent(String(value));
    });
    const search = new URLSearchParams();
    for (const [name, value] of Object.entries((query ?? {}) as Record<string, unknown>)) {
      if (value !== undefined && value !== null) search.append(name, String(value));
    }
    const tail = search.toString();
    return `${this.baseUrl}${filled}${tail ? `?${tail}` : ""}`;
  }

  private async send(url: string, init: RequestInit, resendable: boolean): Promise<Response> {
    for (let attempt = 0; ; attempt++) {
      let response: Response;
      try {
        response = await this.fetcher(url, { ...init, signal: AbortSignal.timeout(this.timeoutMs) });
      } catch (error) {
        // Without a key a resent write could be written twice; with one the server answers the first answer.
        if (!resendable || attempt >= this.retry.maxRetries) throw new TransportError(String(error));
        await this.sleep(this.backoff(attempt));
        continue;
      }
      if (!RETRY_STATUSES.has(response.status) || attempt >= this.retry.maxRetries) return response;
      const after = retryAfter(response.headers);
      if (after !== null && after > this.retry.maxWait) return response;
      await response.body?.cancel();
      await this.sleep(after ?? this.backoff(attempt));
    }
  }

  private backoff(attempt: number): number {
    const ceiling = this.retry.backoff * 2 ** attempt;
    return ceiling / 2 + Math.random() * (ceiling / 2);
  }

  private async decode(response: Response): Promise<unknown> {
    const type = response.headers.get("Content-Type") ?? "";
    const text = response.status === 204 ? "" : await response.text();
    const parsed = type.includes("application/json") && text ? JSON.parse(text) : text || undefined;
    if (response.status >= 400) {
      throw new MemoryHubError(response.status, envelopeOf(response.status, parsed), retryAfter(response.headers));
    }
    return parsed;
  }
}

/** `Retry-After` in seconds, from either form (seconds or an HTTP date). */
export function retryAfter(headers: Headers): number | null {
  const raw = headers.get("Retry-After");
  if (!raw) return null;
  const seconds = Number(raw);
  if (!Number.isNaN(seconds)) return Math.max(0, seconds);
  const when = Date.parse(raw);
  return Number.isNaN(when) ? null : Math.max(0, (when - Date.now()) / 1000);
}
