"""Rolling upgrades of the vLLM fleet: batch plans, vLLM metrics, gates, restores, gateway logs."""
