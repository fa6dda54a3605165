"""Per-family builders shared by the converters (converters are thin argument adapters)."""
