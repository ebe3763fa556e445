#!/usr/bin/env node
// Prints the wrangler commands that create what one environment of wrangler.toml binds: its D1
// database, every queue (each consumer's dead-letter queue too) and R2 bucket, and its required
// secrets. Read from wrangler.toml, so a binding added there is in the list at once (docs/deploy.md).
//
//   node scripts/cloudflare-resources.mjs production    # or staging
import { readFileSync } from "node:fs";
import { parse } from "smol-toml";

const name = process.argv[2];
const config = parse(readFileSync("wrangler.toml", "utf8"));
const section = config.env?.[name];
if (!section) {
  console.error(`usage: node scripts/cloudflare-resources.mjs <${Object.keys(config.env ?? {}).join("|")}>`);
  process.exit(2);
}
const flag = `--env ${name}`;
const lines = [];
for (const db of section.d1_databases ?? [])
  lines.push(
    `npx wrangler d1 create ${db.database_name}   # then put its database_id into [env.${name}] of wrangler.toml`,
  );
const queues = new Set();
for (const producer of section.queues?.producers ?? []) queues.add(producer.queue);
for (const consumer of section.queues?.consumers ?? []) {
  queues.add(consumer.queue);
  if (consumer.dead_letter_queue) queues.add(consumer.dead_letter_queue);
}
for (const queue of queues) lines.push(`npx wrangler queues create ${queue}`);
for (const bucket of section.r2_buckets ?? []) lines.push(`npx wrangler r2 bucket create ${bucket.bucket_name}`);
for (const secret of section.secrets?.required ?? []) lines.push(`npx wrangler secret put ${secret} ${flag}`);
console.log(lines.join("\n"));
