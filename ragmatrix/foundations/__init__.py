"""What every layer stands on: the run and its parts (`context`), canonical JSON and result
keys (`keys`), the caches' folder (`cache`), secrets and their redaction (`secrets`), strict
YAML (`yamlfile`), folders that refuse writes (`storage`) and replacing a file whole
(`atomic_write`). Nothing here imports another layer of the package."""
