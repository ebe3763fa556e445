#!/usr/bin/env node
// The official OpenAI SDK (`npm install openai`), unchanged, against an app run through the gateway:
// the models, a chat completion, and the same completion streamed token by token. `npm run dev` prints
// the command with the demo's values:
//
//   OPENAI_BASE_URL={base_url}/v4/{project_id}/{app_name}/v1 OPENAI_API_KEY={service account token} node examples/openai-client.mjs
import OpenAI from "openai";

const openai = new OpenAI(); // reads OPENAI_BASE_URL and OPENAI_API_KEY

const models = await openai.models.list();
const model = models.data[0].id;
console.log("models:", models.data.map((m) => m.id).join(", "));

const completion = await openai.chat.completions.create({
  model,
  messages: [{ role: "user", content: "Hello from the edge" }],
});
console.log("completion:", completion.choices[0].message.content);

const stream = await openai.chat.completions.create({
  model,
  messages: [{ role: "user", content: "Stream these words one by one" }],
  stream: true,
});
process.stdout.write("stream:");
for await (const chunk of stream) process.stdout.write(chunk.choices[0]?.delta?.content ?? "");
process.stdout.write("\n");
