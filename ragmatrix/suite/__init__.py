"""The benchmark suite as data: the `*_data.yaml` files found, validated and expanded into
cases (`loader`), and the evaluator LLM of the cases that need one (`evaluator`). Free of
pytest; the pytest layer and the commands build on it."""

# The most items one case may expand to (the product of its fields' variant counts), unless
# `--max-variants` or the max_variants ini setting says otherwise. Here, not in the loader, so
# that the plugin's options name it without loading YAML and pydantic in every pytest run.
DEFAULT_MAX_VARIANTS = 2000
