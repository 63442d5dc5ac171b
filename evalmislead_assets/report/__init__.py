"""The study report: build, tables, plots, number formatting (formatting.py) and one module per section (sections/)."""
