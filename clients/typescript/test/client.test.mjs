// The TypeScript client against the live test server (started by tests/clients/test_typescript.py,
// which passes its URL, a fresh project's key and the server's OpenAPI document).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { MemoryHub, MemoryHubError, METHODS, NOT_COVERED, TransportError } from "../dist/src/index.js";

const baseUrl = process.env.MEMORYHUB_URL;
const apiKey = process.env.MEMORYHUB_API_KEY;
const hub = new MemoryHub({ baseUrl, apiKey });
const user = "alice";

test("every operation of the OpenAPI document has a method or a reason", () => {
  const schema = JSON.parse(readFileSync(process.env.MEMORYHUB_OPENAPI, "utf8"));
  const ids = Object.values(schema.paths).flatMap((item) => Object.values(item).map((op) => op.operationId));
  const covered = new Set([...Object.values(METHODS), ...Object.keys(NOT_COVERED)]);
  assert.deepEqual([...new Set(ids)].filter((id) => !covered.has(id)), []);
  for (const name of Object.keys(METHODS)) assert.equal(typeof hub[name], "function", name);
});

test("a memory is created, read, found, listed page by page and deleted", async () => {
  const made = await hub.createMemory({ user_id: user, content: "Alice deploys on Tuesdays.", kind: "fact" });
  assert.equal((await hub.getMemory(made.id, user)).content, "Alice deploys on Tuesdays.");
  const found = await hub.retrieve({ user_id: user, query: "When does Alice deploy?" });
  assert.deepEqual(found.memories.map((m) => m.id), [made.id]);
  assert.match(found.injection, /Tuesdays/);
  await hub.bulkCreateMemories({ memories: [{ user_id: user, content: "Alice uses vim." }, { user_id: user, content: "Alice drinks tea." }] });
  const all = [];
  for await (const memory of hub.iterMemories({ user_id: user, limit: 1 })) all.push(memory.content);
  assert.equal(all.length, 3);
  assert.equal(await hub.deleteMemory(made.id, user), undefined);
  await assert.rejects(hub.getMemory(made.id, user), (error) => {
    assert.ok(error instanceof MemoryHubError);
    assert.deepEqual([error.status, error.code], [404, "not_found"]);
    return true;
  });
});

test("a validation error carries the envelope's code and details", async () => {
  await assert.rejects(hub.createMemory({ user_id: user, content: "x", kind: "rumour" }), (error) => {
    assert.deepEqual([error.status, error.code], [422, "validation_error"]);
    assert.ok(Array.isArray(error.details));
    return true;
  });
});

test("the same idempotency key writes once; another body under it is a 422", async () => {
  const body = { user_id: "bob", content: "Bob reviews pull requests at nine." };
  const first = await hub.createMemory(body, { idempotencyKey: "ts-key-1" });
  const again = await hub.createMemory(body, { idempotencyKey: "ts-key-1" });
  assert.equal(again.id, first.id);
  await assert.rejects(hub.createMemory({ ...body, content: "Bob reviews at ten." }, { idempotencyKey: "ts-key-1" }), {
    status: 422,
    code: "idempotency_conflict",
  });
  assert.equal((await hub.listMemories({ user_id: "bob" })).items.length, 1);
});

test("a 429 or 503 is retried after Retry-After, then the real answer comes", async () => {
  const statuses = [];
  const waits = [];
  let first = true;
  const flaky = async (url, init) => {
    if (first) {
      first = false;
      statuses.push(503);
      return new Response(JSON.stringify({ error: { code: "unavailable", message: "later" } }), {
        status: 503,
        headers: { "Retry-After": "2", "Content-Type": "application/json" },
      });
    }
    const response = await fetch(url, init);
    statuses.push(response.status);
    return response;
  };
  const client = new MemoryHub({ baseUrl, apiKey, fetch: flaky, sleep: async (s) => void waits.push(s) });
  const health = await client.health();
  assert.equal(typeof health.status, "string");
  assert.deepEqual([statuses, waits], [[503, 200], [2]]);
});

test("a create whose answer was lost is resent under its key and written once", async () => {
  const keys = [];
  let lose = 1;
  const lossy = async (url, init) => {
    keys.push(init.headers["Idempotency-Key"]);
    const response = await fetch(url, init);
    if (lose-- > 0) throw new TypeError("fetch failed: socket hang up");
    return response;
  };
  const client = new MemoryHub({ baseUrl, apiKey, fetch: lossy, sleep: async () => {} });
  const made = await client.createMemory({ user_id: "carol", content: "Carol works from Lisbon." });
  assert.equal(keys.length, 2);
  assert.equal(keys[0], keys[1]);
  assert.deepEqual((await hub.listMemories({ user_id: "carol" })).items.map((m) => m.id), [made.id]);
});

test("a read that gets no answer is not resent", async () => {
  let calls = 0;
  const dead = async () => {
    calls += 1;
    throw new TypeError("fetch failed: connection refused");
  };
  const client = new MemoryHub({ baseUrl, apiKey, fetch: dead, sleep: async () => {} });
  await assert.rejects(client.listMemories({ user_id: user }), TransportError);
  assert.equal(calls, 1);
});

test("capture queues a job that can be read back, and export feeds import", async () => {
  const accepted = await hub.capture({
    user_id: "dave",
    session_id: "ts-1",
    trigger: "turn",
    messages: [{ role: "user", content: "I moved to Porto last month." }],
  });
  const job = await hub.captureJob(accepted.job_id, "dave");
  assert.equal(job.session_id, "ts-1");
  await hub.createMemory({ user_id: "dave", content: "Dave prefers dark mode." });
  const lines = await hub.exportJsonl({ user_id: "dave" });
  assert.match(lines, /Dave prefers dark mode/);
  const result = await hub.importJsonl(lines);
  assert.equal(result.imported.memories, 0);
  assert.ok(result.skipped >= 1);
});

test("a consolidation is read back with its counts, the observations' among them", async () => {
  const accepted = await hub.consolidate("erin");
  const run = await hub.consolidation(accepted.job_id, "erin");
  assert.deepEqual([run.job_id, run.status], [accepted.job_id, "queued"]);
  const names = ["kept", "merged", "observation_groups", "observations_proposed", "observed", "proposed", "superseded"];
  assert.deepEqual(Object.keys(run.counts).sort(), names);
  assert.ok(Object.values(run.counts).every((count) => count === 0));
});

test("the scratchpad keeps keys with slashes", async () => {
  await hub.putScratchpad("plan/step-1", { user_id: user, value: { done: false } });
  assert.deepEqual((await hub.getScratchpad("plan/step-1", user)).value, { done: false });
  assert.deepEqual((await hub.listScratchpad({ user_id: user, prefix: "plan/" })).items.map((e) => e.key), ["plan/step-1"]);
});
