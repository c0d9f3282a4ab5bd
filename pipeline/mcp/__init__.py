"""The MCP server: memory and the ledger as tools and resources (``turnledger mcp``)."""
