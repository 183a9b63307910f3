"""What checkers read out of a history: records, operations, files, lifecycles.

Views, not verdicts: each module turns raw records into the facts several
checkers (and the timeline) reason about, reading every field defensively.
"""
