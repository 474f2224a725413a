/** Agent protocols as channels: MCP, A2A and AG-UI. */
export {};
