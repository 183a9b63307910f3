"""The control connection: browse, attach, activate, restore, detach."""
