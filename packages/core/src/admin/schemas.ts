import { z } from "zod";

const environment = z.enum(["prod", "dev", "staging"]);
const origin = z.string().refine((value) => {
  try {
    return new URL(value).origin === value;
  } catch {
    return false;
  }
}, "allowed origins must be exact origins such as https://app.example.com (scheme, host and port, no path)");
const language = z.string().regex(/^[a-z]{2}_[A-Z]{2}$/, "languages are codes of the form xx_XX, e.g. en_US");

/** Input of `admin.createTenant`. */
export const createTenantSchema = z.object({
  name: z.string().trim().min(1, "a tenant name is required").max(200),
});

/** Input of `admin.createChannel`. */
export const createChannelSchema = z.object({
  tenantId: z.string().min(1, "tenantId is required"),
  flow: z.string().min(1, "a flow name is required"),
  name: z.string().max(200).nullish(),
  type: z.enum(["api", "webhook"]).default("api"),
  environment: environment.default("prod"),
  mode: z.enum(["server", "public"]).default("server"),
  allowedOrigins: z.array(origin).default([]),
  defaultStream: z.boolean().default(false),
  requireSignature: z.boolean().default(false),
  languages: z.array(language).min(1).default(["en_US"]),
  livechatMessages: z.record(z.string(), z.string()).default({}),
});

/** Input of `admin.updateChannel`. */
export const updateChannelSchema = z
  .object({
    name: z.string().max(200).nullable(),
    state: z.enum(["active", "inactive", "archived"]),
    environment,
    flow: z.string().min(1),
    allowedOrigins: z.array(origin),
    defaultStream: z.boolean(),
    requireSignature: z.boolean(),
    languages: z.array(language).min(1),
    livechatMessages: z.record(z.string(), z.string()),
  })
  .partial();

/** Raw input of {@link createChannelSchema}. */
export type CreateChannelInput = z.input<typeof createChannelSchema>;
/** Raw input of {@link updateChannelSchema}. */
export type UpdateChannelInput = z.input<typeof updateChannelSchema>;
