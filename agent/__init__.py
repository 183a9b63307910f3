"""The machine agent ("shim"): protocol core, operations, and the asyncio runtime."""
