"""DuckDB storage: the table registry (schema), connections and partition writes, views, hashes, the file format."""
