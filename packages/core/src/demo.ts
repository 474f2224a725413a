/**
 * `@channelkit/core/demo`: the flows the demo server, the examples and the contract suite
 * bind channels to (`echo`, `fail`, `ask`, `handover`, `slow`; see docs/flows.md).
 */
export { demoFlows, echoFlow, failFlow, askFlow, handoverFlow, slowFlow } from "./flows/demo.js";
