export { toNodeHandler, type NodeHandlerOptions, type WebHandler } from "./handler.js";
export { serve, type ServeOptions, type RunningServer } from "./serve.js";
export { toWebRequest } from "./request.js";
export { writeWebResponse } from "./response.js";
