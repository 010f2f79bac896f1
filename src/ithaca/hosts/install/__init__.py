"""The install steps both hosts share: files, hooks, the MCP server, the manifest, the doctor."""
