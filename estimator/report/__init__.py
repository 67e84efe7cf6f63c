"""Reports of priced results: the terminal table, the JSON contract and the closed form (`table.py`),
fusion comparisons and `--explain` (`fusion.py`), and measured vs bound vs estimate (`validation.py`)."""
