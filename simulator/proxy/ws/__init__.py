"""The fault proxy's WebSocket layer: frame parsing, the upgrade, messages, rules, sessions."""
