"""The procedures as MCP prompts, and ``completion/complete``."""
