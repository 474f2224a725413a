// The in-memory limiter is imported by its own path: the package's index also loads its
// Node-only limiters (`cluster`), which core must not pull in.
declare module "rate-limiter-flexible/lib/RateLimiterMemory.js" {
  import type { RateLimiterMemory } from "rate-limiter-flexible";
  const Limiter: typeof RateLimiterMemory;
  export default Limiter;
}
