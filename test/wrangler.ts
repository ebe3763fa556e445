import { parse } from "smol-toml";
import wranglerToml from "../wrangler.toml?raw";

/** A queue consumer as wrangler.toml declares it. */
export interface WranglerConsumer {
  queue: string;
  max_retries: number;
  max_batch_timeout: number;
  max_batch_size: number;
  dead_letter_queue?: string;
}

/** The parts of a wrangler.toml section (the top level, or an `[env.*]`) the tests hold to the code. */
export interface WranglerSection {
  queues?: { consumers?: WranglerConsumer[] };
  durable_objects?: { bindings?: { name: string; class_name: string }[] };
  migrations?: { tag: string; new_sqlite_classes?: string[] }[];
  env?: Record<string, WranglerSection>;
}

/** wrangler.toml's top level and each of its environments, by name: what a deployment of each gets. */
export function wranglerEnvironments(): [string, WranglerSection][] {
  const config = parse(wranglerToml) as WranglerSection;
  return [["top level", config], ...Object.entries(config.env ?? {})];
}
