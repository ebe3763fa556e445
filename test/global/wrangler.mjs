// Hands the webhook consumer settings of wrangler.toml to the workers tests, which check the code agrees.
import { readFileSync } from "node:fs";
import { parse } from "smol-toml";

export default function setup(project) {
  const config = parse(readFileSync(new URL("../../wrangler.toml", import.meta.url), "utf8"));
  const consumers = [config.queues?.consumers ?? [], config.env?.production?.queues?.consumers ?? []].flat();
  project.provide("queueConsumers", JSON.stringify(consumers));
}
