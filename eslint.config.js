import js from "@eslint/js";
import globals from "globals";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["node_modules/", "dist/", ".wrangler/", "coverage/", "artifacts/", "worker-configuration.d.ts"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "@typescript-eslint/consistent-type-imports": ["error", { fixStyle: "inline-type-imports" }],
      "no-console": ["error", { allow: ["error", "warn", "log"] }],
      eqeqeq: ["error", "always"],
    },
  },
  {
    files: ["test/global/**/*.mjs"],
    languageOptions: {
      globals: {
        process: "readonly",
        console: "readonly",
        URL: "readonly",
        Buffer: "readonly",
        fetch: "readonly",
        AbortSignal: "readonly",
        setTimeout: "readonly",
      },
    },
  },
  {
    files: ["scripts/**/*.mjs", "*.config.js", ".dependency-cruiser.cjs"],
    languageOptions: { globals: globals.node },
  },
  {
    // Node scripts: test peers (vitest globalSetup) and the local sample app.
    files: ["test/global/**/*.mjs", "examples/**/*.mjs", "scripts/seed-demo.mjs"],
    languageOptions: {
      globals: {
        process: "readonly",
        console: "readonly",
        URL: "readonly",
        Buffer: "readonly",
        setTimeout: "readonly",
        fetch: "readonly",
      },
    },
  },
  {
    // The receivers' package runs anywhere Web Crypto does (Node, Workers, Deno, browsers).
    files: ["packages/verify/**/*.js"],
    languageOptions: { globals: { crypto: "readonly", TextEncoder: "readonly" } },
  },
);
