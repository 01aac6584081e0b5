"""The benchmark suite as data: the `*_data.yaml` files found, validated and expanded into
cases (`loader`), and the evaluator LLM of the cases that need one (`evaluator`). Free of
pytest; the pytest layer and the commands build on it."""
