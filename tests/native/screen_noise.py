"""Moved to `tetherbed.simulator.peripherals.screen_noise` (the load tests' video profile
uses it too); kept here so that the tests and bench/video.py import it as before."""

from tetherbed.simulator.peripherals.screen_noise import ScreenNoise

__all__ = ["ScreenNoise"]
