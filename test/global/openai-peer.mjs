// An OpenAI-compatible server for the workers tests, run by vitest in Node (globalSetup): what an LLM
// deployed as a `custom` app answers (vLLM, llama.cpp's server and Ollama speak the same). The official
// `openai` SDK drives it through the gateway (src/runs/openai.test.ts).
//
//   GET  /v1/models             {object: "list", data: [{id, object: "model", created, owned_by}]}
//   POST /v1/chat/completions   a chat.completion; with `"stream": true` the same as server-sent events,
//                               `data: {chat.completion.chunk}\n\n` per token, ending `data: [DONE]\n\n`
//
// The completion echoes the last user message, one word per token. Pacing: a streamed request with
// `X-Hold: <key>` gets its first token at once and the rest only after `POST /control/release/<key>`
// (or 10 s later, so a gateway that buffers makes a test fail rather than hang); `GET /control/<key>`
// says whether the rest was held back, released by the test or by the timer, and whether the client
// hung up. Errors are OpenAI's shape: `{error: {message, type, param, code}}`.
import { createServer } from "node:http";
import { clearTimeout } from "node:timers";

const MODEL = "tiny-echo";
const CREATED = 1_764_000_000;
const HOLD_FALLBACK_MS = 10_000;

/** Per hold key: what happened to that stream, for the test to read. */
const holds = new Map();

async function readBody(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  return Buffer.concat(chunks);
}

function send(res, status, value) {
  const text = JSON.stringify(value);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

const openAiError = (res, status, message, type = "invalid_request_error", param = null) =>
  send(res, status, { error: { message, type, param, code: null } });

/** The tokens of the answer: the last user message, word by word, after a fixed preamble. */
function tokensOf(messages) {
  const last = [...messages].reverse().find((m) => m?.role === "user");
  const text = typeof last?.content === "string" ? last.content : "";
  return [
    "You",
    " said:",
    ...text
      .split(/\s+/)
      .filter(Boolean)
      .map((word) => ` ${word}`),
  ];
}

const usage = (prompt, completion) => ({
  prompt_tokens: prompt,
  completion_tokens: completion,
  total_tokens: prompt + completion,
});

function completion(id, tokens) {
  return {
    id,
    object: "chat.completion",
    created: CREATED,
    model: MODEL,
    choices: [
      {
        index: 0,
        message: { role: "assistant", content: tokens.join(""), refusal: null },
        logprobs: null,
        finish_reason: "stop",
      },
    ],
    usage: usage(4, tokens.length),
  };
}

const chunk = (id, delta, finishReason = null) => ({
  id,
  object: "chat.completion.chunk",
  created: CREATED,
  model: MODEL,
  choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }],
});

/** Resolves when the test releases `key`, or after the fallback; says which. */
function held(key) {
  const state = { firstTokenAt: Date.now(), releasedBy: null, hungUp: false, release: null };
  holds.set(key, state);
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      state.releasedBy = "timer";
      resolve();
    }, HOLD_FALLBACK_MS);
    timer.unref(); // a stream still held never keeps vitest from exiting
    state.release = () => {
      clearTimeout(timer);
      state.releasedBy ??= "test";
      resolve();
    };
  });
}

async function stream(req, res, id, tokens) {
  res.writeHead(200, { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache" });
  const event = (value) => res.write(`data: ${JSON.stringify(value)}\n\n`);
  event(chunk(id, { role: "assistant", content: "" }));
  event(chunk(id, { content: tokens[0] }));
  const key = req.headers["x-hold"];
  if (key) {
    res.on("close", () => {
      if (!res.writableFinished) holds.get(key).hungUp = true;
    });
    await held(key);
  }
  for (const token of tokens.slice(1)) event(chunk(id, { content: token }));
  event(chunk(id, {}, "stop"));
  res.end("data: [DONE]\n\n");
}

async function chatCompletions(req, res) {
  let request;
  try {
    request = JSON.parse((await readBody(req)).toString("utf8"));
  } catch {
    return openAiError(res, 400, "We could not parse the JSON body of your request.");
  }
  if (request?.model !== MODEL)
    return openAiError(res, 404, `The model '${request?.model}' does not exist.`, "invalid_request_error", "model");
  if (!Array.isArray(request.messages) || request.messages.length === 0)
    return openAiError(res, 400, "'messages' must be a non-empty array.", "invalid_request_error", "messages");
  const id = `chatcmpl-${Math.random().toString(36).slice(2, 14)}`;
  const tokens = tokensOf(request.messages);
  if (request.stream === true) return stream(req, res, id, tokens);
  send(res, 200, completion(id, tokens));
}

async function control(req, res, url) {
  const [, , action, key] = url.pathname.split("/");
  if (action === "release" && req.method === "POST") {
    const state = holds.get(key);
    if (!state) return send(res, 404, { error: `no stream held as ${key}` });
    state.release();
    return send(res, 200, { releasedBy: state.releasedBy });
  }
  const state = holds.get(action);
  if (!state) return send(res, 404, { error: `no stream held as ${action}` });
  return send(res, 200, { firstTokenAt: state.firstTokenAt, releasedBy: state.releasedBy, hungUp: state.hungUp });
}

export async function startOpenAiPeer() {
  const server = createServer(async (req, res) => {
    const url = new URL(req.url, "http://peer");
    try {
      if (url.pathname.startsWith("/control/")) return await control(req, res, url);
      if (url.pathname === "/v1/models" && req.method === "GET") {
        return send(res, 200, {
          object: "list",
          data: [{ id: MODEL, object: "model", created: CREATED, owned_by: "edge-gateway-tests" }],
        });
      }
      if (url.pathname === "/v1/chat/completions" && req.method === "POST") return await chatCompletions(req, res);
      openAiError(res, 404, `Unknown request URL: ${req.method} ${url.pathname}.`);
    } catch (error) {
      if (!res.headersSent) openAiError(res, 500, String(error), "server_error");
      else res.destroy();
    }
  });
  server.keepAliveTimeout = 120_000;
  // Every socket accepted, so teardown ends them all (a stream still held included) and vitest can exit.
  const sockets = new Set();
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    close: async () => {
      const closing = new Promise((resolve) => server.close(resolve));
      for (const socket of sockets) socket.destroy();
      await closing;
    },
  };
}

export default async function setup(project) {
  const peer = await startOpenAiPeer();
  project.provide("openaiPeerUrl", peer.url);
  return peer.close;
}
