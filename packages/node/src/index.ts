export {
  toNodeHandler,
  handleNodeRequest,
  type NodeHandlerOptions,
  type NodeRequestOptions,
  type WebHandler,
} from "./handler.js";
export { serve, type ServeOptions, type RunningServer, type ShutdownOptions, SHUTDOWN_GRACE_MS } from "./serve.js";
export { toWebRequest, NodeIncomingRequest, type WebRequestOverrides } from "./request.js";
export { writeReply, writeWebResponse } from "./response.js";
