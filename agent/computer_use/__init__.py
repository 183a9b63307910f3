"""Computer use on the agent: SCREENSHOT_REQUEST, INPUT_ACTION, windows, apps, clipboard.

`service.ComputerUse` answers requests; the other modules are one rule each
(bounds, clipboard policy, input, paste, screenshots, window ids, errors).
"""

from tetherbed.agent.computer_use.service import ComputerUse, ComputerUseInfo, probe

__all__ = ["ComputerUse", "ComputerUseInfo", "probe"]
