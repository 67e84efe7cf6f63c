"""Scaling studies over one priced model: sweeps over grids of dim values (`sweep.py`), regime changes and
crossovers solved on the closed forms (`crossover.py`), and their plots (`plot.py`)."""
