"""The native automation adapter (crossdesk-automation/1): stdio JSON lines and loopback video."""
