"""The scenarios Tetherbed ships, one behaviour per YAML file (package data of the wheel)."""
