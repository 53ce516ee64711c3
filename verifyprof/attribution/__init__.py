"""Attribution: kernel taxonomy, step detection, per-step phase breakdown, collectives."""
