"""What is asked and measured: the verify step of a breakdown (profile, its cycle windows), the
user's options, hardware and model configs, the allreduce and acceptance models."""
