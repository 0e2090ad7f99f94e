"""Tools the chat's model may call: MCP servers (Model Context Protocol, through the official `mcp` SDK).

- `config`: the servers' settings in the common `mcpServers` JSON shape, checked as hostile input.
- `connection`: one server on its own event-loop thread, with timeouts and size caps.
- `toolbox`: a chat's servers together, their tools under names the model can write.
- `loop`: reading the model's calls, the user's approval, the results sent back, the round cap.

Torch-free and Qt-free: used by `specexec chat` (core.cli.chat) and the app's chat. It imports nothing from
the engine; the model's tool-call format comes from the engine's status, the parser from core.text.
"""
