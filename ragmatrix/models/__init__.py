"""The models: providers, the client layer, the caches they share, and the run's registry.

The provider registry is imported with the package (not the providers: they are scanned on
first use), so that `ModelSpec(**entry)` finds the provider an entry names in any process,
whichever module of the package was imported first.
"""

from ragmatrix.models import providers as providers
