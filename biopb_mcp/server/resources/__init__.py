"""The docs as MCP resources: handlers (list, read, templates) and change notifications."""
