"""Fault-injecting proxies: TCP toxics and WebSocket-message-aware faults."""
