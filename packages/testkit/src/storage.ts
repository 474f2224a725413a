/**
 * `@channelkit/testkit/storage`: the behaviour suite every `Storage` passes, without the
 * HTTP suite and its database drivers, for a storage of your own or `memoryStorage()`.
 */
export { pluginStoreContract, storageContract, type StorageUnderTest } from "./storage-contract.js";
