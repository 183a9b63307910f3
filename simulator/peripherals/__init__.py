"""Simulated peripherals: a probe desktop app, serial devices, an Ollama-compatible LLM."""
