"""The activity log: record model (`record`), writer (`writer`), reading (`reader`), filters (`query`), display
(`display`), redaction (`redact`).

Nothing is imported here: `mcphost log tail` must start fast, and the reading side needs no pydantic.
"""
