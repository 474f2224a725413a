/**
 * Throws a TypeError unless `value` is a channel service (what `createChannelService`
 * resolves to): adapters call it with what they were given, once, where they are set up.
 * Given the promise itself (`serve(createChannelService(...))`, the `await` forgotten in
 * JavaScript), an adapter would otherwise answer every request with a 500 and no word why.
 * `call` is the call as the user wrote it, e.g. `serve(service)`; `needsRoutes` when the
 * adapter registers `service.routes`.
 *
 * @example
 * assertChannelService(service, "serve(service)");
 */
export function assertChannelService(value: unknown, call: string, needsRoutes = false): void {
  const given = value as { then?: unknown; handler?: unknown; routes?: unknown } | null | undefined;
  if (given !== null && typeof given === "object" && typeof given.then === "function") {
    throw new TypeError(
      `channelkit: ${call} was given a Promise, not a channel service: createChannelService() is async. Pass what it resolves to: \`const service = await createChannelService({ ... })\`, then \`${call}\`.`,
    );
  }
  const isService = given !== null && typeof given === "object" && typeof given.handler === "function";
  if (!isService || (needsRoutes && !Array.isArray(given.routes))) {
    const got =
      given === null ? "null" : typeof given !== "object" ? typeof given : isService ? "an object without routes" : "an object without a handler() method";
    throw new TypeError(`channelkit: ${call} needs a channel service, \`await createChannelService({ ... })\`, but was given ${got}.`);
  }
}
