# Registers the ragmatrix plugin for this repository: `pytest benchmark` builds the model x
# case matrix, `pytest tests` runs the plugin's own tests.
pytest_plugins = ["plugin"]
