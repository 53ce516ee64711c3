"""Report: console tables, files (JSON/CSV/Parquet, written atomically), HTML."""
