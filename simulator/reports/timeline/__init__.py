"""The HTML timeline of a run: a model of the history, its SVG drawing, the page around it."""

from tetherbed.simulator.reports.timeline.render import render_timeline, write_timeline

__all__ = ["render_timeline", "write_timeline"]
