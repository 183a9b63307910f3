"""The hub: platform side of the protocol and the client relay."""
