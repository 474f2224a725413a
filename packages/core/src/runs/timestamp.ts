/**
 * ISO 8601 text of a time in milliseconds, exactly as `new Date(ms).toISOString()` writes it.
 * V8 formats dates through `snprintf`, which is slow (see docs/benchmarks.md, "Why the code
 * looks like this"); timestamps of one second share everything up to the milliseconds, so
 * that part is formatted once per second and only the milliseconds each time.
 */
export function isoTimestamp(ms: number): string {
  const second = Math.floor(ms / 1000);
  if (second !== lastSecond) {
    const text = new Date(second * 1000).toISOString();
    // Years outside 0000–9999 are written with six digits and a sign: not worth a cache.
    if (text.length !== 24) return new Date(ms).toISOString();
    lastSecond = second;
    lastPrefix = text.slice(0, 20);
  }
  const millis = ms - second * 1000;
  return `${lastPrefix}${millis < 10 ? "00" : millis < 100 ? "0" : ""}${millis}Z`;
}

/** The current time as {@link isoTimestamp} writes it. */
export function isoNow(): string {
  return isoTimestamp(Date.now());
}

let lastSecond = Number.NaN;
/** `YYYY-MM-DDTHH:mm:ss.` of {@link lastSecond}. */
let lastPrefix = "";
