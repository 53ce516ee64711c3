"""Nsight Systems: SQLite exports (read-only, columnar) and .nsys-rep reports (exported once,
cached)."""
