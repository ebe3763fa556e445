/**
 * The one Node API the Worker uses: `AsyncLocalStorage`, which workerd implements natively (the
 * `nodejs_compat` behaviour is on by default from the compatibility date in wrangler.toml). Declared
 * here rather than through @types/node, which would type the whole of Node's globals into `src/`.
 */
declare module "node:async_hooks" {
  export class AsyncLocalStorage<T> {
    run<R>(store: T, callback: () => R): R;
    getStore(): T | undefined;
  }
}
