"""Report: console tables and files (JSON/CSV/Parquet, written atomically)."""
