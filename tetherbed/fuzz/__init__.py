"""Tetherbed's fuzzing for users' own tests: `tetherbed.fuzz.strategies`."""
