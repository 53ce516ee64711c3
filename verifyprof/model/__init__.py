"""Model: throughput (accept_len / cycle time), verify cost, hardware, ranked what-ifs."""
