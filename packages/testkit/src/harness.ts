import type { ChannelView, CreateChannelInput, UpdateChannelInput } from "@channelkit/core";
import { afterAll, afterEach, beforeAll, expect } from "vitest";
import { FIX, takeViolations, unwatchTarget, watchTarget } from "./conformance.js";
import type { ContractTarget, ContractTargetOptions, RunningTarget } from "./types.js";

/** A channel provisioned for one test, with its key and signing secret in clear. */
export interface TestChannel {
  id: string;
  tenantId: string;
  key: string;
  signingSecret: string | null;
  view: ChannelView;
}

/** What a test may ask of a new channel; the tenant is created unless given. */
type ChannelSpec = Omit<CreateChannelInput, "tenantId"> & { tenantId?: string };

/**
 * One running target shared by the tests of a `describe` block: started before its first
 * test, closed after its last. Every test provisions its own tenants and channels, so tests
 * never see each other's data even though they share a database.
 *
 * Every answer of the target that a test receives through the suite's `fetch` is checked
 * against the OpenAPI document (`docs/openapi.json`, see `conformance.ts`): a test fails
 * when one does not conform, or after it when an event stream it read did not.
 */
export class Harness {
  #running: RunningTarget | undefined;

  constructor(target: ContractTarget, options: ContractTargetOptions = {}) {
    beforeAll(async () => {
      this.#running = await target.start(options);
      watchTarget(this.#running.url);
    });
    afterEach(() => {
      const violations = takeViolations();
      expect(violations, `answers that do not conform to the OpenAPI document (docs/openapi.json):\n${violations.join("\n")}\n${FIX}`).toEqual([]);
    });
    afterAll(async () => {
      if (this.#running) unwatchTarget(this.#running.url);
      await this.#running?.close();
      this.#running = undefined;
    });
  }

  /** The running target; only available inside tests and hooks. */
  get target(): RunningTarget {
    if (!this.#running) throw new Error("The contract target is not running: use it inside a test.");
    return this.#running;
  }

  /** `url` + `path`. */
  url(path: string): string {
    return this.target.url + path;
  }

  /** Creates a tenant and returns its id. */
  async tenant(name = "contract tenant"): Promise<string> {
    const { tenant } = await this.target.admin.createTenant({ name });
    return tenant.id;
  }

  /** Creates a channel (in a new tenant unless `tenantId` is given). */
  async channel(spec: ChannelSpec): Promise<TestChannel> {
    const tenantId = spec.tenantId ?? (await this.tenant());
    const created = await this.target.admin.createChannel({ ...spec, tenantId });
    return {
      id: created.channel.id,
      tenantId,
      key: created.api_key,
      signingSecret: created.signing_secret,
      view: created.channel,
    };
  }

  /** Applies an admin patch to a channel. */
  update(channel: TestChannel, patch: UpdateChannelInput) {
    return this.target.admin.updateChannel(channel.id, patch);
  }
}
