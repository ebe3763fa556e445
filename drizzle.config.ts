import { defineConfig } from "drizzle-kit";

// drizzle-kit only generates SQL; `wrangler d1 migrations apply` is the one tool that applies it.
export default defineConfig({
  dialect: "sqlite",
  schema: "./src/db/schema.ts",
  out: "./migrations",
});
