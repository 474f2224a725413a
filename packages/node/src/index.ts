export {
  toNodeHandler,
  handleNodeRequest,
  type NodeHandlerOptions,
  type NodeRequestOptions,
  type WebHandler,
} from "./handler.js";
export { serve, type ServeOptions, type RunningServer } from "./serve.js";
export { toWebRequest, NodeIncomingRequest, type WebRequestOverrides } from "./request.js";
export { writeReply, writeWebResponse } from "./response.js";
