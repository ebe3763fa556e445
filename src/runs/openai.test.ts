import { env, exports } from "cloudflare:workers";
import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { client, seedProject } from "../../test/helpers";
import { deploy } from "../../test/runs";

declare global {
  // eslint-disable-next-line @typescript-eslint/no-namespace
  namespace Cloudflare {
    interface Env {
      /** test/global/openai-peer.mjs: an OpenAI-compatible server. */
      OPENAI_PEER_URL: string;
    }
  }
}

// The official SDK, unchanged, in workerd beside the gateway: its requests go to the Worker's own
// `fetch` (the entry `wrangler dev` serves, src/index.ts) instead of a socket, so the answer it reads is
// the Worker's response as a client receives it, streamed. The SDK supports Workers and takes a custom
// `fetch`; nothing here is a stand-in for it.
const api = client();
const PEER = env.OPENAI_PEER_URL;
const viaGateway: typeof fetch = (input, init) => exports.default.fetch(new Request(input, init));

/** A `custom` app whose deployment is the OpenAI-compatible peer, and an SDK client pointed at it through the gateway. */
async function llmApp() {
  const seed = await seedProject(api);
  const created = await api.json<{ app_id: string }>(`/v2/projects/${seed.projectId}/apps`, {
    method: "POST",
    token: seed.token,
    body: { name: "llm", region: "us-east-1", runtime: "custom" },
  });
  expect(created.status).toBe(201);
  await deploy(api, { ...seed, appId: created.body.app_id }, PEER);
  const openai = new OpenAI({
    baseURL: `http://localhost/v4/${seed.projectId}/llm/v1`,
    apiKey: seed.token,
    fetch: viaGateway,
    maxRetries: 0,
    timeout: 20_000,
  });
  return { ...seed, openai };
}

const hold = () => `hold-${crypto.randomUUID()}`;
const holdState = async (key: string) =>
  (await (await fetch(`${PEER}/control/${key}`)).json()) as {
    firstTokenAt: number;
    releasedBy: "test" | "timer" | null;
    hungUp: boolean;
  };

describe("the official OpenAI SDK against a custom app, through the gateway", () => {
  it("lists the models, with the run's id on the answer", async () => {
    const { openai } = await llmApp();
    const { data: page, response } = await openai.models.list().withResponse();
    expect(page.data).toEqual([
      { id: "tiny-echo", object: "model", created: 1_764_000_000, owned_by: "edge-gateway-tests" },
    ]);
    expect(response.headers.get("x-run-id")).toMatch(/^run_/);
  });

  it("creates a chat completion: the app's JSON as the app sent it, not an envelope", async () => {
    const { openai } = await llmApp();
    const completion = await openai.chat.completions.create({
      model: "tiny-echo",
      messages: [{ role: "user", content: "hello from the edge" }],
    });
    expect(completion).toMatchObject({
      object: "chat.completion",
      model: "tiny-echo",
      choices: [
        { index: 0, message: { role: "assistant", content: "You said: hello from the edge" }, finish_reason: "stop" },
      ],
      usage: { completion_tokens: 6 },
    });
    expect(completion).not.toHaveProperty("run_id");
  });

  it("streams a chat completion: the first token arrives while the app still holds back the rest", async () => {
    const { openai } = await llmApp();
    const key = hold();
    const stream = await openai.chat.completions.create(
      { model: "tiny-echo", messages: [{ role: "user", content: "stream me three words" }], stream: true },
      { headers: { "X-Hold": key } },
    );
    const tokens: string[] = [];
    let finish: string | null = null;
    for await (const chunk of stream) {
      const choice = chunk.choices[0]!;
      if (choice.delta.content) {
        if (tokens.length === 0) {
          // The peer writes the rest only when released (or after 10 s): a gateway that buffered the
          // stream would hand over this token after the timer, and the peer would say so.
          expect(choice.delta.content).toBe("You");
          expect((await holdState(key)).releasedBy).toBeNull();
          await fetch(`${PEER}/control/release/${key}`, { method: "POST" });
        }
        tokens.push(choice.delta.content);
      }
      finish = choice.finish_reason ?? finish;
    }
    expect(tokens.join("")).toBe("You said: stream me three words");
    expect(finish).toBe("stop");
    expect(await holdState(key)).toMatchObject({ releasedBy: "test", hungUp: false });
  });

  it("stops the app's stream when the SDK aborts it", async () => {
    const { openai } = await llmApp();
    const key = hold();
    const stream = await openai.chat.completions.create(
      { model: "tiny-echo", messages: [{ role: "user", content: "never finished" }], stream: true },
      { headers: { "X-Hold": key } },
    );
    for await (const chunk of stream) {
      if (chunk.choices[0]?.delta.content) break; // leaving the loop aborts the request
    }
    await expect.poll(async () => (await holdState(key)).hungUp, { timeout: 5_000 }).toBe(true);
    expect((await holdState(key)).releasedBy).toBeNull();
  });

  it("raises the SDK's own typed errors for the app's errors and the gateway's", async () => {
    const { openai, projectId } = await llmApp();
    // The app's 404 in OpenAI's error shape, passed through.
    const missing = await openai.chat.completions
      .create({ model: "gpt-none", messages: [{ role: "user", content: "hi" }] })
      .catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(OpenAI.NotFoundError);
    expect((missing as InstanceType<typeof OpenAI.NotFoundError>).message).toContain(
      "The model 'gpt-none' does not exist.",
    );
    // The gateway's 401 problem for a wrong key: the app is never asked. The SDK reads OpenAI's
    // `error` member only, so the problem's detail is not in its message; its request id is.
    const stranger = new OpenAI({
      baseURL: `http://localhost/v4/${projectId}/llm/v1`,
      apiKey: "not-a-key",
      fetch: viaGateway,
      maxRetries: 0,
    });
    const refused = await stranger.models.list().catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(OpenAI.AuthenticationError);
    expect((refused as InstanceType<typeof OpenAI.AuthenticationError>).requestID).toMatch(/^req_/);
  });
});
