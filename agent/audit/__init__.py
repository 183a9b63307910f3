"""The agent's tamper-evident audit log: the HMAC chain, its key, redaction, sink, verifier."""
