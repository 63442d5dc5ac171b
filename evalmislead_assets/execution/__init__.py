"""From an answer to the four cells: extraction, import normalisation, collection, the dataset's oracle, cells,
and a partition's batch of them (batch.py)."""
