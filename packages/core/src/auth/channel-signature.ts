import type { ServiceContext } from "../context.js";
import { ServiceError } from "../http/errors.js";
import type { ChannelRecord } from "../storage/types.js";
import { readRawBody, type WithBody } from "../http/body.js";
import { verifySignature } from "./signature.js";

/** The 503's message when the channel has a secret that the configured master key cannot open. */
const SEALED_UNDER_ANOTHER_KEY =
  "A signature is required, but this channel's signing secret cannot be opened with the master key the service is configured with: it was sealed under another key.";

/**
 * Checks a request's `X-Service-Signature` against the channel's signing secret, over the
 * exact raw body: `503 signing_secret_unavailable` when the channel has no secret the master
 * key opens, else the signature's own codes. Call it only when the channel requires one.
 */
export async function checkChannelSignature(
  request: { headers: { get(name: string): string | null } },
  channel: ChannelRecord,
  body: Uint8Array,
  ctx: ServiceContext,
): Promise<void> {
  const sealed = channel.signingSecretEncrypted;
  const secret = sealed === null ? null : await ctx.secrets.decrypt(sealed);
  if (secret === null) {
    if (sealed === null) throw new ServiceError("signing_secret_unavailable");
    ctx.logger.error(
      `channelkit: the signing secret of channel ${channel.id} cannot be opened with the configured master key (CHANNELKIT_SECRET_KEY): it was sealed under another key. Start with that key, or rotate the secret.`,
    );
    throw new ServiceError("signing_secret_unavailable", SEALED_UNDER_ANOTHER_KEY);
  }
  await verifySignature(request.headers.get("x-service-signature"), secret, body);
}

/**
 * On a channel that requires signatures, reads the request's body (empty for most routes
 * that change state without one: the cancels) and checks its signature, as execute does: a
 * key alone does not stop a run or end a live chat there (docs/security.md).
 */
export async function checkSignedRequest(
  request: WithBody & { headers: { get(name: string): string | null } },
  channel: ChannelRecord,
  ctx: ServiceContext,
): Promise<void> {
  if (!channel.requireSignature) return;
  await checkChannelSignature(request, channel, await readRawBody(request, ctx.maxBodyBytes), ctx);
}
